"""``import duetime`` stays cheap: scheduling a timer never loads the HTTP, API or CLI stacks.

Each check runs in a fresh interpreter, since this one has already imported everything.
"""

import json
import subprocess
import sys

import pytest

import duetime

HEAVY = ("httpx", "fastapi", "starlette", "uvicorn", "prometheus_client", "rich", "click")


def loaded_after(code: str) -> dict[str, list[str]]:
    """The heavy packages and the duetime modules a fresh interpreter holds after ``code``."""
    report = (
        "import json, sys; print(json.dumps({"
        f"'heavy': [m for m in {HEAVY!r} if m in sys.modules], "
        "'duetime': sorted(m for m in sys.modules if m.split('.')[0] == 'duetime')}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True, check=True
    )
    loaded: dict[str, list[str]] = json.loads(done.stdout)
    return loaded


@pytest.mark.parametrize(
    "code",
    [
        "import duetime",
        "from duetime import App, AsyncApp, TimerRequest, ScheduleRequest, Event, Retry",
        "from duetime.destinations import build_destination, Destinations",
    ],
)
def test_scheduling_imports_no_server_http_or_cli_package(code: str) -> None:
    assert loaded_after(code)["heavy"] == []


def test_time_math_alone_loads_a_handful_of_modules() -> None:
    loaded = loaded_after("import duetime.timemath.tzmath")["duetime"]
    # The package's own __init__ (with its lazy re-exports), errors, and the time-math package.
    assert loaded == [
        "duetime",
        "duetime.errors",
        "duetime.support",
        "duetime.support.lazy",
        "duetime.timemath",
        "duetime.timemath.tzmath",
    ]


def test_a_webhook_destination_brings_httpx_when_it_is_used() -> None:
    assert "httpx" in loaded_after("from duetime.destinations import WebhookDestination")["heavy"]


@pytest.mark.parametrize("name", duetime.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(duetime, name) is not None
    assert name in dir(duetime)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = duetime.no_such_name  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        from duetime import no_such_name  # type: ignore[attr-defined]  # noqa: F401
