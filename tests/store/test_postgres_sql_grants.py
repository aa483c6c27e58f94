"""``duetime sql grant ROLE --namespace NS``: a database role that may only call the SQL
functions, in the namespaces it was granted, and cannot touch duetime's tables itself."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from storekit import PG_URL

from duetime.cli.main import cli


@pytest.fixture
def role(pg_schema: str, login_role: str) -> str:
    """A login role of its own, and the namespaces it is granted."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(
            f'INSERT INTO "{pg_schema}".namespaces VALUES (%s, now()), (%s, now())',
            ("billing", "payroll"),
        )
    return login_role


def _as(role: str, schema: str) -> psycopg.Connection[Any]:
    return psycopg.connect(PG_URL, user=role, autocommit=True, options=f"-c search_path={schema}")


def _duetime(*args: str) -> Any:
    result = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_granted_role_schedules_only_into_its_namespaces(
    pg_url: str, pg_schema: str, role: str
) -> None:
    with _as(role, pg_schema) as conn, pytest.raises(psycopg.errors.UndefinedFunction):
        conn.execute("SELECT * FROM schedule('billing', 't', delay => '1s')")  # no USAGE yet

    answer = _duetime("sql", "grant", role, "--namespace", "billing", "--database-url", pg_url)
    assert answer["namespaces"] == ["billing"]
    assert any(f.startswith((f"{pg_schema}.schedule(", "schedule(")) for f in answer["functions"])

    with _as(role, pg_schema) as conn:
        made = conn.execute(
            "SELECT action FROM schedule('billing', 'invoice.due', delay => '1h', key => 'i1')"
        ).fetchone()
        assert made == ("created",)
        assert conn.execute("SELECT action FROM emit('billing', 'paid')").fetchone() == ("created",)
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
            conn.execute("SELECT * FROM schedule('payroll', 't', delay => '1s')")
        assert refused.value.diag.message_primary is not None
        assert refused.value.diag.message_primary.startswith(
            f"namespace: role {role} may not use namespace 'payroll'"
        )
        assert refused.value.diag.column_name == "namespace"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM cancel('payroll', 'i1')")
        for statement in (
            "SELECT * FROM timers",
            "SELECT * FROM timer_keys",
            "UPDATE timers SET status = 'done'",
            "DELETE FROM sql_grants",
            "SELECT * FROM sql_put('', 'payroll', 't', 'null', NULL, '1s', NULL, NULL,"
            " 'compatible', NULL, NULL, NULL, NULL, NULL, NULL, 'update', now())",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        assert conn.execute("SELECT * FROM cancel('billing', 'i1')").fetchone() is not None

    assert _duetime("sql", "grants", "--database-url", pg_url)["grants"] == [
        {"role": role, "namespace": "billing"}
    ]
    assert (
        _duetime("sql", "revoke", role, "--namespace", "billing", "--database-url", pg_url)[
            "revoked"
        ]
        == 1
    )
    with _as(role, pg_schema) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT * FROM emit('billing', 'paid')")


def test_grant_refuses_an_unknown_role_or_namespace(pg_url: str, role: str) -> None:
    for args, field in (
        (["no_such_role_here", "--namespace", "billing"], "role"),
        ([role, "--namespace", "nowhere"], "namespace"),
    ):
        result = CliRunner().invoke(
            cli, ["sql", "grant", *args, "--database-url", pg_url, "--json"]
        )
        assert result.exit_code != 0
        assert json.loads(result.stderr)["field"] == field
