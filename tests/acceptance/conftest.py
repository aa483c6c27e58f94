"""Run the real ``duetime`` console script as a subprocess against a per-test SQLite file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from duetime import App


def _console_script() -> str:
    beside = Path(sys.executable).parent / "duetime"
    if beside.exists():
        return str(beside)
    found = shutil.which("duetime")
    if found is None:  # pragma: no cover - the package is installed in the venv
        pytest.skip("the duetime console script is not installed")
    return found


DUETIME = _console_script()


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def error(self) -> dict[str, Any]:
        """The JSON error object a ``--json`` command wrote on stderr (its last line)."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert lines, f"no error on stderr (exit {self.code}, stdout {self.stdout!r})"
        error: dict[str, Any] = json.loads(lines[-1])
        return error


class Cli:
    """``cli("ls", "--json")`` runs ``duetime ls --json`` in ``tmp_path`` on its own database."""

    def __init__(self, tmp_path: Path) -> None:
        self.cwd = tmp_path
        self.db_path = tmp_path / "duetime.db"
        self.db_url = f"sqlite:///{self.db_path}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
        env["DUETIME_DATABASE_URL"] = self.db_url
        env.pop("COLUMNS", None)
        self.env = env

    def __call__(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None
    ) -> Result:
        done = subprocess.run(
            [DUETIME, *args],
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            input=input,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def ok(self, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> Any:
        """Run with ``--json``, insist on exit 0, return the parsed document."""
        result = self(*args, "--json", input=input, env=env)
        assert result.code == 0, f"exit {result.code}: {result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        return result.json()

    def fails(
        self, *args: str, code: int, input: str | None = None, env: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Run with ``--json``, insist on exit ``code`` and no traceback, return the error."""
        result = self(*args, "--json", input=input, env=env)
        assert result.code == code, f"exit {result.code}: {result.stdout} {result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        assert result.stdout == ""
        return result.error()

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [DUETIME, *args],
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def stored_keys(self) -> list[str]:
        """Every key in the default namespace, read in-process (no file → nothing stored)."""
        if not self.db_path.exists():
            return []
        with App(database_url=self.db_url, namespace="default") as app:
            return [timer.key for timer in app.history(limit=1000).items]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


APP_MODULE = """
import os
import threading

from duetime import App, Dead

app = App()


@app.handler("greet")
def greet(event):
    with open(os.environ["DUETIME_TEST_OUT"], "a") as out:
        out.write(event.key + "\\n")


@app.handler("doomed")
def doomed(event):
    raise Dead("this one never works")


def look_up(payload):
    return payload["missing"]


@app.handler("broken")
def broken(event):
    look_up(event.payload)


@app.handler("stuck")
def stuck(event):
    with open(os.environ["DUETIME_TEST_OUT"], "a") as out:
        out.write(event.key + "\\n")
    threading.Event().wait()  # a call that never returns
"""


@pytest.fixture
def app_module(cli: Cli) -> str:
    """A user's app module in the working directory: ``greet`` appends keys to a file."""
    (cli.cwd / "userapp.py").write_text(APP_MODULE)
    cli.env["DUETIME_TEST_OUT"] = str(cli.cwd / "out.txt")
    return "userapp:app"
