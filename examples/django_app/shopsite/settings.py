"""The example shop's settings: one PostgreSQL database, shared by Django and duetime.

``SHOP_DATABASE_URL`` names it (default ``postgresql://postgres@127.0.0.1:5432/
duetime_django_example``); duetime's tables go into its ``duetime`` schema, beside Django's.
"""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

_database = conninfo_to_dict(
    os.environ.get(
        "SHOP_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/duetime_django_example"
    )
)

SECRET_KEY = os.environ.get("SHOP_SECRET_KEY", "an-example-only-secret")
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "shopsite.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Closes duetime's connections before the test database is dropped (docs/django.md).
TEST_RUNNER = "duetime.contrib.django.runner.DiscoverRunner"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "duetime.contrib.django",
    "orders",
]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _database.get("dbname", "duetime_django_example"),
        "USER": _database.get("user", "postgres"),
        "PASSWORD": _database.get("password", ""),
        "HOST": _database.get("host", "127.0.0.1"),
        "PORT": _database.get("port", "5432"),
    }
}

# duetime: the database is DATABASES["default"] (in its "duetime" schema); see docs/django.md.
DUETIME = {"NAMESPACE": "shop"}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"duetime": {"handlers": ["console"], "level": "INFO"}},
}
