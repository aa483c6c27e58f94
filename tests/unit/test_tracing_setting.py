"""The ``tracing`` setting: auto follows the program's OpenTelemetry set-up, without importing
OpenTelemetry when the program did not; a bad value or a missing package names the setting."""

from __future__ import annotations

import subprocess
import sys

import pytest

from duetime import InvalidInput
from duetime.config import Settings
from duetime.observability.tracing import tracing_for


def test_a_bad_value_names_the_setting() -> None:
    with pytest.raises(InvalidInput, match="must be one of auto, on, off") as caught:
        Settings.from_env({"DUETIME_TRACING": "sometimes"})
    assert caught.value.field == "tracing"
    assert "'sometimes'" in str(caught.value)


def test_off_is_off_even_with_a_provider_given() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    assert tracing_for("off", TracerProvider()) is None
    assert tracing_for("auto", TracerProvider()) is not None


def python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_auto_traces_once_the_program_sets_a_provider() -> None:
    assert python(
        "from duetime.observability.tracing import tracing_for\n"
        "print(tracing_for('auto'))\n"  # OpenTelemetry not even imported yet
        "from opentelemetry import trace\n"
        "print(tracing_for('auto'))\n"  # imported, but the API's placeholder provider
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "print(type(tracing_for('auto')).__name__)\n"
    ).splitlines() == ["None", "None", "Tracing"]


def test_on_without_opentelemetry_names_the_extra() -> None:
    out = python(
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if not installed\n"
        "from duetime import InvalidInput\n"
        "from duetime.observability.tracing import tracing_for\n"
        "print(tracing_for('auto'))\n"
        "try:\n"
        "    tracing_for('on')\n"
        "except InvalidInput as exc:\n"
        "    print(exc.field, exc.message)\n"
    )
    none, error = out.splitlines()
    assert none == "None"
    assert error.startswith(
        "tracing tracing: 'on' needs OpenTelemetry: pip install 'duetime[otel]'"
    )
