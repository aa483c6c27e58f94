"""Settings come from defaults, then DUETIME_* variables, then explicit arguments."""

from __future__ import annotations

from datetime import timedelta

import pytest

from duetime.config import Settings
from duetime.errors import InvalidInput


def test_defaults_use_the_sqlite_file_in_the_working_directory() -> None:
    settings = Settings.from_env({})
    assert settings.database_url == "sqlite:///duetime.db"
    assert settings.namespace == "default"


def test_environment_then_arguments() -> None:
    env = {
        "DUETIME_DATABASE_URL": "sqlite:///other.db",
        "DUETIME_NAMESPACE": "shop",
        "DUETIME_LEASE": "12.5",
        "DUETIME_HEARTBEAT": "3",
        "DUETIME_CONCURRENCY": "7",
        "DUETIME_MIGRATE": "false",
    }
    settings = Settings.from_env(env, namespace="billing")
    assert settings.database_url == "sqlite:///other.db"
    assert settings.namespace == "billing"
    assert settings.lease == timedelta(seconds=12.5)
    assert settings.concurrency == 7
    assert settings.migrate is False


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"DUETIME_CONCURRENCY": "many"}, "DUETIME_CONCURRENCY"),
        ({"DUETIME_LEASE": "soon"}, "DUETIME_LEASE"),
        ({"DUETIME_MIGRATE": "perhaps"}, "DUETIME_MIGRATE"),
        ({"DUETIME_NAMESPACE": "Not Valid"}, "namespace"),
        ({"DUETIME_DATABASE_URL": "mysql://x"}, "database_url"),
        ({"DUETIME_LEASE": "5", "DUETIME_HEARTBEAT": "10"}, "heartbeat"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Settings.from_env(env)
    assert info.value.field == field
