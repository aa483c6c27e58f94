"""Database URLs naming several hosts (libpq's syntax for a highly available PostgreSQL): accepted
everywhere, handed to libpq unchanged, and never shown with their password."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.store import create_store
from duetime.store.postgres.settings import parse_url
from duetime.support.redaction import redact_url

HA = (
    "postgresql://app:s3cr%40t@db-a.internal:5432,db-b.internal:5433/orders"
    "?target_session_attrs=read-write&schema=billing&sslmode=require&pool_max=4"
)


def test_several_hosts_reach_libpq_as_written() -> None:
    settings = parse_url(HA)
    params = conninfo_to_dict(settings.conninfo)
    assert params["host"] == "db-a.internal,db-b.internal"
    assert params["port"] == "5432,5433"
    assert params["target_session_attrs"] == "read-write"
    assert params["password"] == "s3cr@t"
    assert params["sslmode"] == "require"
    assert (settings.schema, settings.pool_max) == ("billing", 4)
    assert "schema" not in params
    assert "pool_max" not in params


def test_a_dead_server_is_noticed_in_seconds_unless_the_url_says_otherwise() -> None:
    params = conninfo_to_dict(parse_url(HA).conninfo)
    assert params["connect_timeout"] == "10"
    assert params["keepalives_idle"] == "30"
    assert params["tcp_user_timeout"] == "30000"
    mine = conninfo_to_dict(parse_url(HA + "&connect_timeout=3&keepalives=0").conninfo)
    assert (mine["connect_timeout"], mine["keepalives"]) == ("3", "0")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://a,b/db",
        "postgresql://a:1,b:2/db?target_session_attrs=any",
        "postgresql://a:1,b:2/db?target_session_attrs=prefer-standby",
        "postgresql:///db?host=a,b",
    ],
)
def test_several_hosts_without_asking_for_the_writable_one_are_refused(url: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        create_store(url)
    assert caught.value.field == "database_url"
    assert "target_session_attrs=read-write" in str(caught.value)


def test_a_url_that_reaches_read_only_servers_is_refused() -> None:
    with pytest.raises(ValueError, match="refuse writes"):
        parse_url("postgresql://db/app?target_session_attrs=read-only")
    for attrs in ("read-write", "primary", "any"):
        parse_url(f"postgresql://db/app?target_session_attrs={attrs}")


def test_settings_and_the_store_take_a_multi_host_url_unchanged() -> None:
    settings = Settings.from_env({"DUETIME_DATABASE_URL": HA})
    assert settings.database_url == HA
    store = create_store(settings.database_url)
    assert conninfo_to_dict(store.settings.conninfo)["host"] == "db-a.internal,db-b.internal"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (HA, HA.replace("s3cr%40t", "***")),
        (
            "postgresql://app@a:1,b:2/db?password=hunter2&target_session_attrs=read-write",
            "postgresql://app@a:1,b:2/db?password=***&target_session_attrs=read-write",
        ),
        ("postgresql://a,b/db?sslpassword=x", "postgresql://a,b/db?sslpassword=***"),
        ("redis://:pw@cache:6379/0", "redis://:***@cache:6379/0"),
        ("postgresql://a:1,b:2/db?target_session_attrs=read-write", None),
        ("nats://[::1", None),  # unparseable: left alone
    ],
)
def test_passwords_are_hidden_and_nothing_else_changes(url: str, shown: str | None) -> None:
    assert redact_url(url) == (url if shown is None else shown)


def test_errors_about_a_url_never_show_its_password() -> None:
    with pytest.raises(ValueError, match="not a PostgreSQL URL") as caught:
        parse_url("mysql://root:hunter2@db/app")
    assert "hunter2" not in str(caught.value)


def test_durable_claims_is_duetimes_own_and_off_by_default() -> None:
    assert not parse_url(HA).durable_claims
    assert parse_url(HA).claim_params == {"claim_commit": "off"}
    settings = parse_url(HA + "&durable_claims=true")
    assert settings.durable_claims
    assert settings.claim_params == {"claim_commit": "on"}
    assert "durable_claims" not in conninfo_to_dict(settings.conninfo)
    with pytest.raises(ValueError, match="durable_claims must be true or false"):
        parse_url(HA + "&durable_claims=sometimes")
