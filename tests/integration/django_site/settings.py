"""A minimal Django project for tests/integration/test_django.py, on the test PostgreSQL server
(``DUETIME_TEST_PG``) in a database of its own, which Django's test runner makes ``test_…``."""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

_server = conninfo_to_dict(
    os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
)

SECRET_KEY = "tests-only"
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "duetime.contrib.django",
    "tests.integration.django_site.notes",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "duetime_contrib_django",
        "USER": _server.get("user", "postgres"),
        "PASSWORD": _server.get("password", ""),
        "HOST": _server.get("host", "127.0.0.1"),
        "PORT": _server.get("port", "5432"),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DUETIME = {
    "NAMESPACE": "notes",
    "SCHEMA": "duetime_notes",
    "BACKOFF_BASE": "PT0.05S",
    "BACKOFF_CAP": "PT0.1S",
    "HANDLERS": ["tests.integration.django_site.more_handlers"],
}
