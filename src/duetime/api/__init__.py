"""The REST API, dashboard and metrics endpoint that ``duetime serve`` runs."""

from duetime.api.app import app_from_env, create_api
from duetime.api.config import ApiSettings

__all__ = ["ApiSettings", "app_from_env", "create_api"]
