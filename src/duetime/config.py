"""Settings, from keyword arguments or ``DUETIME_*`` environment variables (12-factor).

Every setting has a default that works on a laptop; an environment variable overrides the default
and an explicit argument overrides both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from typing import Any

from duetime.errors import InvalidInput
from duetime.observability.tracing import check_tracing
from duetime.support.sealing import Sealing
from duetime.timemath.bounds import check_timedelta
from duetime.timemath.durations import parse_span
from duetime.validation import DEFAULT_MAX_PAYLOAD_BYTES, check_namespace

DEFAULT_DATABASE_URL = "sqlite:///duetime.db"
DEFAULT_NAMESPACE = "default"
"""Exists in every database: opening it creates it, so a fresh database needs no set-up."""


@dataclass(frozen=True, slots=True)
class Settings:
    """How a duetime process connects and works; see docs/operating.md for each one."""

    database_url: str = DEFAULT_DATABASE_URL
    namespace: str = DEFAULT_NAMESPACE
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_attempts: int = 20
    concurrency: int = 100
    batch_size: int = 500
    lease: timedelta = timedelta(seconds=30)
    heartbeat: timedelta = timedelta(seconds=10)
    recheck: timedelta = timedelta(seconds=30)
    """The safety re-check: a worker re-reads the next due time at least this often."""
    rescue_interval: timedelta = timedelta(seconds=5)
    shutdown_grace: timedelta = timedelta(seconds=30)
    backoff_base: timedelta = timedelta(seconds=2)
    backoff_cap: timedelta = timedelta(hours=1)
    no_subscriber_grace: timedelta = timedelta(seconds=30)
    """An event no live node subscribes to is dead-lettered once this overdue (0: never)."""
    migrate: bool = True
    retention: timedelta = timedelta(days=30)
    """Finished timers (dead letters too) are deleted this long after they finished."""
    archive_after: timedelta = timedelta(hours=1)
    """PostgreSQL: finished timers move from the hot table to the history this long after."""
    maintenance_interval: timedelta = timedelta(seconds=60)
    """How often a worker runs the retention step (archive, prune, history partitions)."""
    clock_warn: timedelta = timedelta(seconds=1)
    """A node warns when its wall clock is this far from the database's (it keeps working on
    the database's clock either way)."""
    max_limits: int = 1_000
    """Limit and pause rules one namespace may hold (a destination's own rate is not one)."""
    max_schedules: int = 1_000_000
    """Schedules one namespace may hold."""
    max_namespaces: int = 10_000
    """Namespaces a database may hold: the REST API and the CLI create no more."""
    max_tokens: int = 1_000
    """Active API tokens a database may hold."""
    max_routes: int = 1_000
    """Routes one namespace's app may have."""
    statement_timeout: timedelta = timedelta(seconds=10)
    """The longest one REST request's database statement may run before it is ended (503):
    one tenant's slow request cannot hold a connection the others need."""
    reads_per_namespace: int = 1
    """REST reads of one namespace served at once; the others wait their turn (at most
    ``statement_timeout``), so one tenant's many listings cannot crowd out the other tenants."""
    connection_wait: timedelta = timedelta(seconds=1)
    """How long a REST request waits for a database connection before it is answered 503
    with ``Retry-After`` instead of hanging."""
    page_bytes: int = 4 * 1024 * 1024
    """The most JSON one REST listing page holds: a page reaching it ends early, with the
    cursor after its last item (always one item at least), so rendering a page of large
    payloads stays short beside the other tenants' requests."""
    seal_keys: str = field(default="", repr=False)
    """The key ring that seals values at rest, ``<id>:<base64 of 32 bytes>`` comma-separated,
    the first one sealing, every one opening (see docs/security.md). Empty: nothing sealed."""
    seal_namespaces: str = "*"
    """The namespaces whose payloads are sealed once ``seal_keys`` is set: ``*`` (all) or a
    comma-separated list."""
    tracing: str = "auto"
    """OpenTelemetry spans: ``auto`` (when the program has set a tracer provider), ``on`` or
    ``off`` (see docs/observability.md)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults ← ``DUETIME_<NAME>`` variables ← non-None ``overrides``."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"DUETIME_{f.name.upper()}")
            if raw is not None and raw != "":
                values[f.name] = _parse(f.name, raw, f.type)
        values.update({k: v for k, v in overrides.items() if v is not None})
        for name, value in list(values.items()):
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if (numeric or isinstance(value, str)) and _is_duration(name):
                values[name] = parse_span(value, name)
        settings = replace(cls(), **values)
        settings.check()
        return settings

    def sealing(self) -> Sealing:
        """What ``seal_keys`` and ``seal_namespaces`` say to seal, and with what."""
        return Sealing.from_settings(self.seal_keys, self.seal_namespaces)

    def check(self) -> None:
        check_namespace(self.namespace)
        check_tracing(self.tracing)
        self.sealing()
        for f in fields(self):
            if _is_duration(f.name):
                check_timedelta(getattr(self, f.name), f.name)
        for name in (
            *CAPS,
            "max_payload_bytes",
            "max_attempts",
            "concurrency",
            "batch_size",
            "reads_per_namespace",
            "page_bytes",
        ):
            if getattr(self, name) < 1:
                raise InvalidInput(name, "must be at least 1")
        for name in ("lease", "heartbeat", "recheck", "rescue_interval", "backoff_base"):
            if getattr(self, name) <= timedelta(0):
                raise InvalidInput(name, "must be a positive duration")
        if self.backoff_cap < self.backoff_base:
            raise InvalidInput("backoff_cap", "must not be shorter than backoff_base")
        if self.no_subscriber_grace < timedelta(0):
            raise InvalidInput("no_subscriber_grace", "must not be negative (0 turns it off)")
        if self.heartbeat >= self.lease:
            raise InvalidInput("heartbeat", "must be shorter than the lease it renews")
        for name in (
            "retention",
            "archive_after",
            "maintenance_interval",
            "clock_warn",
            "statement_timeout",
            "connection_wait",
        ):
            if getattr(self, name) <= timedelta(0):
                raise InvalidInput(name, "must be a positive duration")
        if self.archive_after >= self.retention:
            raise InvalidInput("archive_after", "must be shorter than retention")
        if not (self.database_url.startswith(("sqlite:///", "postgresql://", "postgres://"))):
            raise InvalidInput(
                "database_url",
                "must start with sqlite:/// or postgresql:// "
                f"(got {self.database_url.split(':', 1)[0]!r})",
            )


def _is_duration(name: str) -> bool:
    return name in {
        "lease",
        "heartbeat",
        "recheck",
        "rescue_interval",
        "shutdown_grace",
        "backoff_base",
        "backoff_cap",
        "no_subscriber_grace",
        "retention",
        "archive_after",
        "maintenance_interval",
        "clock_warn",
        "statement_timeout",
        "connection_wait",
    }


CAPS = ("max_limits", "max_schedules", "max_namespaces", "max_tokens", "max_routes")
"""The settings that bound what a tenant can create (see docs/operating.md, "Caps")."""


def _parse(name: str, raw: str, annotation: object) -> Any:
    field = f"DUETIME_{name.upper()}"
    if _is_duration(name):
        return parse_span(raw, field)
    if annotation in (bool, "bool"):
        lowered = raw.strip().lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        raise InvalidInput(field, f"must be true or false, not {raw!r}")
    if annotation in (int, "int"):
        try:
            return int(raw)
        except ValueError:
            raise InvalidInput(field, f"must be a whole number, not {raw!r}") from None
    return raw
