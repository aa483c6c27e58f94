"""How the REST API runs: the core settings plus auth and request limits, from flags or env."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass

from duetime.api.hosts import allowed_hosts_for
from duetime.config import Settings
from duetime.errors import InvalidInput

BODY_OVERHEAD_BYTES = 16 * 1024
"""Room for the other fields of a request body besides the payload."""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """Settings of one API process; ``auth=None`` means on once any token has been created."""

    core: Settings
    auth: bool | None = None
    max_body_bytes: int | None = None
    upcoming_limit: int = 20
    allowed_hosts: tuple[str, ...] | None = None
    r"""With auth off, the ``Host`` names (and browser ``Origin``\ s) answered; None checks
    neither (an API mounted in another application). ``duetime serve`` sets them."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> ApiSettings:
        """``DUETIME_*`` variables (``DUETIME_AUTH`` for auth) for uvicorn's factory mode.

        The ``Host`` and ``Origin`` checks apply as under ``duetime serve``: with auth off, the
        names answered are the loopback ones, ``DUETIME_HOST`` and ``DUETIME_ALLOWED_HOSTS``
        (space-separated), so a server started by one's own uvicorn is no easier to reach
        from a web page (CSRF, DNS rebinding) than ``duetime serve``."""
        env = os.environ if env is None else env
        raw = env.get("DUETIME_AUTH", "").strip().lower()
        auth: bool | None = None
        if raw in {"1", "true", "yes", "on"}:
            auth = True
        elif raw in {"0", "false", "no", "off"}:
            auth = False
        elif raw:
            raise InvalidInput("DUETIME_AUTH", f"must be true or false, not {raw!r}")
        bound = env.get("DUETIME_HOST", "").strip() or DEFAULT_HOST
        hosts = allowed_hosts_for(bound, env.get("DUETIME_ALLOWED_HOSTS", "").split())
        return cls(core=Settings.from_env(env, **overrides), auth=auth, allowed_hosts=hosts)

    @property
    def body_limit(self) -> int:
        """The largest request body read: the payload limit plus room for the other fields."""
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        return self.core.max_payload_bytes + BODY_OVERHEAD_BYTES


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
