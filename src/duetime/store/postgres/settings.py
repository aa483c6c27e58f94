"""PostgreSQL store settings read from the database URL, so one string configures everything.

duetime's own query parameters (``schema``, ``pool_min``, ``pool_max``, ``pool_timeout``,
``listen``, ``durable_claims``) are taken out of the URL; the rest (host, sslmode, …) goes to
libpq untouched.
Every connection gets the schema as its ``search_path``, ``synchronous_commit=on`` (an
acknowledgement follows a durable commit) and ``TimeZone=UTC`` (instants come back as UTC
datetimes).

Several hosts (libpq's ``postgresql://a:5432,b:5432/db``) are a highly available cluster:
every connection must reach the one that takes writes, so such a URL needs
``target_session_attrs=read-write`` (or ``primary``); libpq then tries the hosts in turn. A dead
server must be noticed in seconds, not at the operating system's TCP timeouts (minutes): unless
the URL says otherwise, connecting gives up after :data:`LIVENESS` ``connect_timeout`` per host,
and TCP keepalives and ``tcp_user_timeout`` end a connection whose server went silent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from duetime.support.redaction import redact_url

SCHEMES = ("postgresql://", "postgres://")
DEFAULT_SCHEMA = "duetime"
OWN_PARAMS = ("schema", "pool_min", "pool_max", "pool_timeout", "listen", "durable_claims")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
WRITABLE = ("read-write", "primary")
"""``target_session_attrs`` values that reach a server taking writes (duetime always writes)."""
LIVENESS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
"""libpq settings that notice a dead or unreachable server (a failover) within about a minute
on an idle connection and 30 s on a busy one; each can be set in the URL instead."""
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,54}")
"""Lower-case identifiers short enough that ``duetime_<schema>`` is a valid channel name."""


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """Where to connect and how: libpq conninfo, schema, pool sizing and wake-ups."""

    conninfo: str
    schema: str
    pool_min: int = 1
    pool_max: int = 10
    pool_timeout: float = 10.0
    listen: bool = True
    """Hear other nodes' wake-ups over LISTEN/NOTIFY (``?listen=false``: only the safety
    re-check finds work stored by other processes; e.g. behind a pooler without sessions)."""
    durable_claims: bool = False
    """A claim commits like every other write (``synchronous_commit=on``: flushed, and confirmed
    by a synchronous standby) instead of without waiting. With it a failover never hands out
    an attempt that a handler already began; without it a claim made in the last milliseconds
    before a crash may be forgotten and its attempt run again (at-least-once)."""

    @property
    def claim_params(self) -> dict[str, str]:
        """The parameters of ``claim_in_order``: how a claim's transaction commits."""
        return {"claim_commit": "on" if self.durable_claims else "off"}

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel of this schema's wake-ups."""
        return f"duetime_{self.schema}"


def parse_url(url: str) -> PostgresSettings:
    """Split a ``postgresql://…[?schema=name]`` URL into libpq conninfo and duetime settings."""
    if not url.startswith(SCHEMES):
        raise ValueError(f"not a PostgreSQL URL: {redact_url(url)!r}")
    # Split by hand, not with urlsplit/urlunsplit: those drop the empty host of
    # ``postgresql:///db?host=/run/postgresql`` and know nothing of several hosts.
    before, _, query = url.partition("?")
    ours: dict[str, str] = {}
    theirs: list[str] = []
    for item in filter(None, query.split("&")):
        name, _, value = item.partition("=")
        if unquote(name) in OWN_PARAMS:
            ours[unquote(name)] = unquote(value)
        else:
            theirs.append(item)  # left exactly as written: libpq decodes it
    schema = ours.get("schema", DEFAULT_SCHEMA)
    if not _SCHEMA.fullmatch(schema):
        raise ValueError(
            f"schema {schema!r} must be a lower-case identifier ([a-z_][a-z0-9_]*, ≤ 55 chars)"
        )
    libpq_url = f"{before}?{'&'.join(theirs)}" if theirs else before
    try:
        params = conninfo_to_dict(libpq_url)
    except Exception as exc:  # psycopg.ProgrammingError: libpq could not parse it
        raise ValueError(f"invalid PostgreSQL URL: {exc}") from exc
    # No JIT: the store's statements are short, and the generic plan of a claim on a large
    # analysed table is priced at a tenth of the table (it cannot know the LIMIT), which is
    # over jit_above_cost: each claim would then compile its plan, which costs more than the
    # claim itself saves on a statement this short.
    options = f"-c search_path={schema} -c synchronous_commit=on -c TimeZone=UTC -c jit=off"
    if params.get("options"):
        options = f"{params['options']} {options}"
    params["options"] = options
    params.setdefault("application_name", "duetime")
    _check_hosts(params)
    for name, value in LIVENESS.items():
        params.setdefault(name, value)
    try:
        pool_min = int(ours.get("pool_min", "1"))
        pool_max = int(ours.get("pool_max", "10"))
        pool_timeout = float(ours.get("pool_timeout", "10"))
    except ValueError as exc:
        raise ValueError(f"pool_min, pool_max and pool_timeout must be numbers: {exc}") from exc
    if not 0 <= pool_min <= pool_max or pool_max < 1 or pool_timeout <= 0:
        raise ValueError("need 0 <= pool_min <= pool_max, pool_max >= 1 and pool_timeout > 0")
    listen_text = ours.get("listen", "true").strip().lower()
    if listen_text not in _TRUE + _FALSE:
        raise ValueError(f"listen must be true or false, not {ours['listen']!r}")
    durable_text = ours.get("durable_claims", "false").strip().lower()
    if durable_text not in _TRUE + _FALSE:
        raise ValueError(f"durable_claims must be true or false, not {ours['durable_claims']!r}")
    return PostgresSettings(
        make_conninfo("", **params),
        schema,
        pool_min,
        pool_max,
        pool_timeout,
        listen=listen_text in _TRUE,
        durable_claims=durable_text in _TRUE,
    )


def _check_hosts(params: Mapping[str, object]) -> None:
    """A URL naming several hosts must ask for the writable one (ValueError otherwise)."""
    attrs = str(params.get("target_session_attrs") or "any")
    several = "," in str(params.get("host") or "") or "," in str(params.get("hostaddr") or "")
    if several and attrs not in WRITABLE:
        raise ValueError(
            "a URL with several hosts needs target_session_attrs=read-write (or primary), "
            f"not {attrs!r}: duetime writes, and only the primary takes writes"
        )
    if attrs not in (*WRITABLE, "any"):
        raise ValueError(
            f"target_session_attrs={attrs} reaches servers that refuse writes; "
            "use read-write (or primary)"
        )
