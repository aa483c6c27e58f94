"""``settings.DUETIME``: duetime's settings in a Django project, read when they are needed.

Every :class:`duetime.config.Settings` field may be given by its upper-case name
(``"MAX_ATTEMPTS": 5``, ``"LEASE": "PT1M"``); ``DUETIME_*`` environment variables fill what the
dict leaves out. Besides those: ``DATABASE_ALIAS`` (the Django database duetime shares, default
``default``), ``SCHEMA`` (duetime's PostgreSQL schema there, default ``duetime``) and
``HANDLERS`` (modules to import besides each app's ``duetime_handlers``).

The database URL is ``DATABASE_URL``, else ``DUETIME_DATABASE_URL``, else built from the
alias's connection settings when it is PostgreSQL — read from the live connection, so under
Django's test runner it is the test database.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any
from urllib.parse import quote

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from duetime.config import Settings
from duetime.errors import InvalidInput

OWN_KEYS = ("DATABASE_ALIAS", "SCHEMA", "HANDLERS")
CORE_KEYS = {f.name.upper(): f.name for f in fields(Settings)}
POSTGRES_ENGINES = (
    "django.db.backends.postgresql",
    "django.contrib.gis.db.backends.postgis",
)
LIBPQ_OPTIONS = (
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslpassword",
    "connect_timeout",
    "application_name",
    "target_session_attrs",
    "service",
    "passfile",
    "options",
)
"""Entries of a database's ``OPTIONS`` that are libpq's and go into the URL (Django's own,
such as ``isolation_level`` or ``pool``, do not)."""


def raw() -> Mapping[str, Any]:
    value = getattr(django_settings, "DUETIME", {})
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"DUETIME must be a dict, not {type(value).__name__}")
    for key in value:
        if key not in CORE_KEYS and key not in OWN_KEYS:
            known = ", ".join(sorted([*CORE_KEYS, *OWN_KEYS]))
            raise ImproperlyConfigured(f"DUETIME[{key!r}] is not a duetime setting ({known})")
    return value


def database_alias() -> str:
    alias = raw().get("DATABASE_ALIAS", "default")
    if alias not in django_settings.DATABASES:
        raise ImproperlyConfigured(
            f"DUETIME['DATABASE_ALIAS'] is {alias!r}, which is not in DATABASES"
        )
    return str(alias)


def handler_modules() -> list[str]:
    modules = raw().get("HANDLERS", [])
    if isinstance(modules, str) or not all(isinstance(m, str) for m in modules):
        raise ImproperlyConfigured("DUETIME['HANDLERS'] must be a list of module names")
    return list(modules)


_made: tuple[object, Settings] | None = None
"""The last settings made, and what they were made from: they are read on every use of the app,
and made again when ``DUETIME`` or the database's connection settings change (a test's
``override_settings``, the test runner's switch to its database); ``DUETIME_*`` variables are
read when they are made."""


def duetime_settings() -> Settings:
    """duetime's settings for this process (ImproperlyConfigured naming the key when bad)."""
    global _made
    given = raw()
    alias = given.get("DATABASE_ALIAS", "default")
    database = connections[alias].settings_dict if alias in connections.settings else {}
    source = (repr(given), *(database.get(key) for key in ("NAME", "HOST", "PORT", "USER")))
    if _made is not None and _made[0] == source:
        return _made[1]
    settings = _make(given)
    _made = (source, settings)
    return settings


def _make(given: Mapping[str, Any]) -> Settings:
    overrides = {CORE_KEYS[key]: value for key, value in given.items() if key in CORE_KEYS}
    if "database_url" not in overrides and not os.environ.get("DUETIME_DATABASE_URL"):
        alias = database_alias()
        schema = str(given.get("SCHEMA", "duetime"))
        overrides["database_url"] = database_url(connections[alias].settings_dict, alias, schema)
    try:
        return Settings.from_env(**overrides)
    except InvalidInput as exc:
        raise improperly_configured(exc) from exc


def improperly_configured(exc: InvalidInput) -> ImproperlyConfigured:
    """A settings error named as the project writes it: ``DUETIME['MAX_ATTEMPTS']: …``."""
    field = exc.field or ""
    key = field.removeprefix("DUETIME_").upper()
    return ImproperlyConfigured(f"DUETIME[{key!r}]: {exc.message.removeprefix(field + ': ')}")


def database_url(database: Mapping[str, Any], alias: str, schema: str) -> str:
    """duetime's ``postgresql://`` URL for one of Django's ``DATABASES`` entries."""
    engine = str(database.get("ENGINE", ""))
    if engine not in POSTGRES_ENGINES:
        raise ImproperlyConfigured(
            f"duetime shares DATABASES[{alias!r}] only when it is PostgreSQL (its ENGINE is "
            f"{engine!r}): set DUETIME['DATABASE_URL'] (or DUETIME_DATABASE_URL), or "
            "DUETIME['DATABASE_ALIAS'] to a PostgreSQL database"
        )
    user, password = database.get("USER") or "", database.get("PASSWORD") or ""
    host, port = str(database.get("HOST") or ""), str(database.get("PORT") or "")
    credentials = quote(str(user), safe="")
    if password:
        credentials += ":" + quote(str(password), safe="")
    query = {"schema": schema}
    if host.startswith("/"):  # a Unix socket's directory
        query["host"], host = host, ""
    netloc = f"{credentials}@" if credentials else ""
    netloc += f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port else ""
    options = database.get("OPTIONS") or {}
    query.update({key: str(options[key]) for key in LIBPQ_OPTIONS if key in options})
    name = quote(str(database.get("NAME") or ""), safe="")
    encoded = "&".join(f"{key}={quote(value, safe='')}" for key, value in query.items())
    return f"postgresql://{netloc}/{name}?{encoded}"
