"""The ``Host`` names a server answers with auth off: every way to serve the API (``duetime
serve``, uvicorn's factory, an embedding) builds its list here, for the guard to check."""

from __future__ import annotations

from collections.abc import Iterable

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def host_name(value: str) -> str:
    """The name of a ``Host`` header or an address, without port or brackets, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def allowed_hosts_for(bound: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The loopback names, the address the server is bound to, and the configured ones."""
    names = [*LOCAL_HOSTS, host_name(bound), *(host_name(name) for name in extra)]
    return tuple(dict.fromkeys(name for name in names if name))
