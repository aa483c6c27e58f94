"""The REST API, dashboard and metrics endpoint that ``duetime serve`` runs, or that
:func:`mount` puts inside your own FastAPI or Starlette application."""

from duetime.api.app import app_from_env, create_api
from duetime.api.config import ApiSettings
from duetime.api.embed import Embedded, mount

__all__ = ["ApiSettings", "Embedded", "app_from_env", "create_api", "mount"]
