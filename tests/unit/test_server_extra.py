"""Without ``duetime[server]`` the CLI and ``duetime serve`` name the extra to install.

Each case runs a fresh interpreter in which the package is made unimportable (``None`` in
``sys.modules`` is how Python marks a module that must not be imported), as on a library-only
install.
"""

import subprocess
import sys

import pytest

from duetime.support.extras import SERVER_PACKAGES, server_missing


def run_cli_without(package: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "from duetime.cli.entry import main\n"
        f"sys.exit(main({list(args)!r}))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@pytest.mark.parametrize("package", ["click", "rich"])
def test_the_command_names_the_extra_when_its_cli_packages_are_missing(package: str) -> None:
    done = run_cli_without(package, "--help")
    assert done.returncode == 2
    assert "pip install 'duetime[server]'" in done.stderr
    assert f"({package} is not installed)" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("package", ["fastapi", "uvicorn"])
def test_serve_names_the_extra_when_the_web_stack_is_missing(package: str) -> None:
    done = run_cli_without(package, "serve", "--help")
    assert done.returncode != 0
    assert "'duetime serve' needs duetime's server extra" in done.stderr
    assert "pip install 'duetime[server]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_other_commands_work_without_the_web_stack() -> None:
    done = run_cli_without("fastapi", "next", "--help")
    assert done.returncode == 0, done.stderr


def test_only_server_packages_are_blamed_on_the_extra() -> None:
    assert server_missing(ModuleNotFoundError(name="psycopg"), "x") is None
    assert server_missing(ImportError("no name"), "x") is None
    for package in SERVER_PACKAGES:
        message = server_missing(ModuleNotFoundError(name=f"{package}.sub"), "x")
        assert message is not None
        assert package in message
