"""The ``duetime`` command against a per-test SQLite file: in this process through Click's test
runner (``cli``), or the real console script as a subprocess (``real_cli``, ``Cli.popen``)."""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from duetime import App
from duetime.cli.entry import main as duetime_main


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
    """``cli("ls", "--json")`` runs ``duetime ls --json`` in ``tmp_path`` on its own database.

    It runs in this process, as the console script would: the same entry point, the working
    directory and environment (``self.env`` alone, no other ``DUETIME_*``), standard streams of
    its own, logging set up afresh, and an uncaught exception printed as a traceback with exit 1.
    Whatever the command imported from the working directory (a user's app module) is forgotten
    afterwards, so the next command imports it anew, as a new process would.
    """

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
        wanted = {**self.env, **(env or {})}
        isolated: dict[str, str | None] = {k: None for k in os.environ if k not in wanted}
        isolated |= wanted
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        modules, path, cwd, environ = set(sys.modules), sys.path[:], os.getcwd(), {**os.environ}
        runner = CliRunner()
        with runner.isolation(input=input, env=isolated) as (stdout, stderr, _):
            root.handlers = []  # as in a new process: the CLI's logging goes to its stderr
            os.chdir(self.cwd)
            importlib.invalidate_caches()  # modules written since the last command
            try:
                code = duetime_main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:
                sys.stderr.write(traceback.format_exc())
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.chdir(cwd)
                os.environ.clear()  # what the command exported for an app (a process's own)
                os.environ.update(environ)
                root.handlers, root.level = handlers, level
                sys.path[:] = path
                for name in set(sys.modules) - modules:
                    where = getattr(sys.modules[name], "__file__", None) or ""
                    if Path(where).is_relative_to(self.cwd):
                        del sys.modules[name]
            out = stdout.getvalue().decode(runner.charset, "replace")
            err = stderr.getvalue().decode(runner.charset, "replace")
        return Result(code, out, err)

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
        """The real console script in a process of its own (a worker to signal, a server)."""
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
            return [timer.key for timer in app.timers.history(limit=1000).items]


class RealCli(Cli):
    """Like :class:`Cli`, but each command is the real ``duetime`` console script, a subprocess:
    for the few tests that check the installed command itself."""

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


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    def environment() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}

    before = environment()
    yield Cli(tmp_path)
    # Commands run in this process: none may leave its settings to the tests after it.
    assert environment() == before, "a command in process changed the test's environment"


@pytest.fixture
def real_cli(tmp_path: Path) -> RealCli:
    return RealCli(tmp_path)


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
