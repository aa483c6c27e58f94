"""Secrets out of URLs before they reach a log line or an error message.

A URL may carry a password in two places: its user part (``user:secret@host``) and, for libpq,
a ``password=`` (or ``sslpassword=``) parameter. Both become ``***``; everything else, several
hosts included (``postgresql://u:secret@a:5432,b:5432/db``), is left exactly as written.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

SECRET_PARAMS = frozenset({"password", "sslpassword"})
HIDDEN = "***"


def redact_url(url: str) -> str:
    """``url`` with every password replaced by ``***`` (unparseable: returned as it is)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:{HIDDEN}@{hosts}"
    query = "&".join(_hide(item) for item in parts.query.split("&")) if parts.query else ""
    if netloc == parts.netloc and query == parts.query:
        return url
    return parts._replace(netloc=netloc, query=query).geturl()


def _hide(item: str) -> str:
    name, equals, _ = item.partition("=")
    return f"{name}={HIDDEN}" if equals and unquote(name) in SECRET_PARAMS else item
