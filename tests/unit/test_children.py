"""The session's check for processes its tests left running finds them, and stops them."""

from __future__ import annotations

import subprocess
import sys

from tests.children import descendants, stop_all


def test_a_process_left_running_is_found_with_its_command_line_and_stopped() -> None:
    started = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        found = descendants()
        assert started.pid in found
        assert "time.sleep(600)" in found[started.pid]
        stop_all({started.pid: found[started.pid]})
        assert started.pid not in descendants()
        assert started.returncode is None or started.returncode < 0
    finally:
        started.kill()
        started.wait()


def test_an_ended_process_is_not_left_running() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert all("-c pass" not in line for line in descendants().values())
