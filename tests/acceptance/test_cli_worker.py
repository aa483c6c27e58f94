"""``duetime worker``, ``tick``, ``dead`` and ``nodes`` running a user's app module."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from tests.waiting import wait_until

from .conftest import Cli


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    wait_until(condition, timeout, "the worker's effect", every=0.05)


def jsonl(*requests: dict[str, object]) -> str:
    return "".join(json.dumps(request) + "\n" for request in requests)


def handled(cli: Cli) -> list[str]:
    out = cli.cwd / "out.txt"
    return out.read_text().splitlines() if out.exists() else []


@contextmanager
def running(
    cli: Cli, *args: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    process = cli.popen(*args, env=env)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_worker_fires_timers_and_stops_cleanly_on_sigterm(
    cli: Cli, app_module: str, loop: str
) -> None:
    keys = [f"w{i}" for i in range(5)]
    args = ("worker", "--app", app_module, "--concurrency", "4", "--json")
    # The default ("auto") is uvloop where it is installed, as it is with duetime's dependencies.
    env = {"DUETIME_EVENT_LOOP": "auto" if loop == "uvloop" else loop}
    with running(cli, *args, env=env) as worker:
        requests = [{"type": "greet", "delay": 0.5, "key": key} for key in keys]
        assert cli.ok("schedule", "--from-file", "-", input=jsonl(*requests))["created"] == 5
        wait_for(lambda: len(handled(cli)) == 5)

        nodes = cli.ok("nodes")["items"]
        assert [(n["pid"], n["alive"], n["role"]) for n in nodes] == [(worker.pid, True, "worker")]
        table = cli("nodes")
        assert "alive" in table.stdout

        worker.send_signal(signal.SIGTERM)
        stdout, stderr = worker.communicate(timeout=15)
    assert worker.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "starting" in stderr  # logs go to stderr at info level by default
    assert f"event loop {loop}" in stderr
    assert json.loads(stdout)["outcomes"] == {"done": 5}
    assert sorted(handled(cli)) == keys
    done = cli.ok("ls", "--status", "done")["items"]
    assert sorted(t["key"] for t in done) == keys
    assert cli.ok("nodes")["items"] == []  # deregistered on the way out


def test_nodes_shows_a_killed_worker_as_stale(cli: Cli, app_module: str) -> None:
    with running(cli, "worker", "--app", app_module) as worker:
        wait_for(lambda: bool(cli.ok("nodes")["items"]), timeout=30.0)
        worker.kill()
        worker.communicate()
    short_lease = {"DUETIME_LEASE": "0.3", "DUETIME_HEARTBEAT": "0.1"}
    # its last heartbeat is older than the short lease: wait for that, not for a fixed time
    wait_for(lambda: not cli.ok("nodes", env=short_lease)["items"][0]["alive"])
    (node,) = cli.ok("nodes", env=short_lease)["items"]
    assert (node["pid"], node["alive"]) == (worker.pid, False)
    assert "stale" in cli("nodes", env=short_lease).stdout


def test_tick_fires_what_is_due_and_reports_outcomes(cli: Cli, app_module: str) -> None:
    requests = jsonl(
        {"type": "greet", "delay": 0, "key": "now"},
        {"type": "greet", "delay": 3600, "key": "later"},
        {"type": "doomed", "delay": 0, "key": "d1"},
    )
    cli.ok("schedule", "--from-file", "-", input=requests)
    stats = cli.ok("tick", "--app", app_module)
    assert stats["claimed"] == 2
    assert stats["outcomes"] == {"dead": 1, "done": 1}
    assert handled(cli) == ["now"]
    assert cli.ok("show", "later")["timer"]["status"] == "scheduled"
    again = cli("tick", "--app", app_module)
    assert again.code == 0, again.stderr
    assert "claimed 0" in again.stdout


def test_tick_records_every_outcome_before_it_exits(cli: Cli, app_module: str) -> None:
    expected: dict[str, str] = {}
    for n in range(3):  # the race loses a batch about half the time
        requests = jsonl(
            {"type": "greet", "delay": 0, "key": f"g{n}"},
            {"type": "doomed", "delay": 0, "key": f"d{n}"},
        )
        cli.ok("schedule", "--from-file", "-", input=requests)
        cli.ok("tick", "--app", app_module)
        expected |= {f"g{n}": "done", f"d{n}": "dead"}
    statuses = {t["key"]: t["status"] for t in cli.ok("ls")["items"]}
    assert statuses == expected


def test_dead_letters_list_show_and_replay(cli: Cli, app_module: str) -> None:
    with running(cli, "worker", "--app", app_module) as worker:
        requests = jsonl(
            {"type": "doomed", "delay": 0, "key": "d1"},
            {"type": "doomed", "delay": 0, "key": "d2"},
        )
        cli.ok("schedule", "--from-file", "-", input=requests)
        wait_for(lambda: len(cli.ok("dead", "ls")["items"]) == 2)
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=15)
    assert worker.returncode == 0

    dead = cli.ok("dead", "ls")["items"]
    assert [t["key"] for t in dead] == ["d2", "d1"]
    assert dead[0]["last_error"] == "this one never works"
    assert "this one never works" in cli("dead", "ls").stdout
    shown = cli.ok("show", "d1")
    assert [(a["number"], a["outcome"]) for a in shown["attempts"]] == [(1, "dead")]
    assert shown["attempts"][0]["error"] == "this one never works"
    human = cli("show", "d1").stdout
    assert "attempts" in human
    assert "this one never works" in human

    replayed = cli.ok("dead", "replay", "d1")
    assert (replayed["action"], replayed["timer"]["status"]) == ("replayed", "scheduled")
    assert cli.fails("dead", "replay", "d1", code=4)["code"] == "conflict"
    narrowed = ("dead", "replay", "--all", "--type", "doom*", "--due-until", "P1D")
    assert cli.ok(*narrowed) == {"replayed": 0, "keys": []}  # d2 was due less than a day ago
    assert cli.fails("dead", "replay", "--all", "--type", "no way", code=2)["field"] == "type"
    assert cli.fails("dead", "replay", "d2", "--type", "doomed", code=2)["code"] == "usage"
    assert cli.ok("dead", "replay", "--all", "--type", "doom*") == {"replayed": 1, "keys": ["d2"]}
    assert cli.ok("dead", "ls")["items"] == []
    assert cli.ok("dead", "replay", "--all") == {"replayed": 0, "keys": []}
    assert cli.fails("dead", "replay", code=2)["code"] == "usage"
    assert cli.fails("dead", "replay", "nope", code=3)["code"] == "not_found"


def test_explicit_flags_reach_an_app_built_from_the_environment(cli: Cli, app_module: str) -> None:
    other = ("--database-url", f"sqlite:///{cli.cwd / 'other.db'}", "--namespace", "other")
    cli.ok("namespaces", "create", "other", *other)
    cli.ok("emit", "greet", "--key", "elsewhere", *other)
    stats = cli.ok("tick", "--app", app_module, *other)
    assert stats["outcomes"] == {"done": 1}
    assert handled(cli) == ["elsewhere"]
    assert not cli.db_path.exists()


def test_a_replayed_timer_fires_again(cli: Cli, app_module: str) -> None:
    cli.ok("schedule", "doomed", "--delay", "0", "--key", "d1")
    cli.ok("tick", "--app", app_module)
    cli.ok("dead", "replay", "d1")
    assert cli.ok("tick", "--app", app_module)["outcomes"] == {"dead": 1}
    attempts = cli.ok("show", "d1")["attempts"]
    assert [a["number"] for a in attempts] == [1, 2]


def test_a_replayed_timer_counts_its_attempts_from_the_replay(cli: Cli, app_module: str) -> None:
    """Stored, a replay after one attempt of 20 reads "1 of 21"; shown, it is counted from the
    replay, with the attempts before it said apart."""

    def attempts_row() -> str:
        shown = cli("show", "d1")
        assert shown.code == 0, shown.stderr
        (row,) = [line for line in shown.stdout.splitlines() if line.startswith("attempts ")]
        return row.removeprefix("attempts").strip()

    cli.ok("schedule", "doomed", "--delay", "0", "--key", "d1")
    cli.ok("tick", "--app", app_module)
    assert attempts_row() == "1 of 20"
    replayed = cli.ok("dead", "replay", "d1")["timer"]
    assert (replayed["attempts"], replayed["max_attempts"]) == (1, 21)  # as stored
    assert attempts_row() == "0 of 20 since the replay (1 before it)"
    cli.ok("tick", "--app", app_module)
    assert attempts_row() == "1 of 20 since the replay (1 before it)"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--app", "userapp"], "app"),
        (["--app", "no_such_module:app"], "app"),
        (["--app", "userapp:missing"], "app"),
        (["--app", "userapp:greet"], "app"),
        (["--app", "fixed:app", "--database-url", "sqlite:///elsewhere.db"], "database_url"),
        (["--app", "fixed:app", "--namespace", "elsewhere"], "namespace"),
        (["--app", "userapp:app", "--concurrency", "0"], "concurrency"),
        (["--app", "userapp:app", "--lease", "-1"], "lease"),
    ],
)
def test_worker_refuses_a_bad_setup(cli: Cli, app_module: str, args: list[str], field: str) -> None:
    fixed = 'from duetime import AsyncApp\napp = AsyncApp("sqlite:///fixed.db", "fixed")\n'
    (cli.cwd / "fixed.py").write_text(fixed)
    error = cli.fails("worker", *args, code=2)
    assert error["field"] == field


@pytest.mark.parametrize("command", [["worker"], ["tick"], ["ls"]])
def test_an_unknown_event_loop_is_refused_by_name(
    cli: Cli, app_module: str, command: list[str]
) -> None:
    args = [*command, "--app", app_module] if command != ["ls"] else command
    error = cli.fails(*args, code=2, env={"DUETIME_EVENT_LOOP": "trio"})
    assert error["field"] == "DUETIME_EVENT_LOOP"
    assert "auto, asyncio, uvloop" in error["message"]
    assert not cli.db_path.exists()  # refused before anything was opened


def test_show_prints_the_traceback_of_a_failed_attempt(cli: Cli, app_module: str) -> None:
    request = {"type": "broken", "delay": 0, "key": "b1", "payload": {}, "max_attempts": 1}
    cli.ok("schedule", "--from-file", "-", input=jsonl(request))
    assert cli.ok("tick", "--app", app_module)["outcomes"] == {"dead": 1}
    (attempt,) = cli.ok("show", "b1")["attempts"]
    assert attempt["error"] == "gave up after 1 attempts: KeyError: 'missing'"
    trace = attempt["traceback"]
    assert trace.startswith("Traceback (most recent call last):")
    assert 'userapp.py", line' in trace
    assert "in look_up" in trace
    assert trace.endswith("KeyError: 'missing'\n")
    assert "executor.py" in trace
    assert "executor.py" not in attempt["traceback_trimmed"]
    assert attempt["traceback_trimmed"].endswith("KeyError: 'missing'\n")
    human = cli("show", "b1").stdout  # the handler's frames first, duetime's folded
    assert "traceback of attempt 1, duetime's frames folded (--full):" in human
    assert "in look_up" in human
    assert "executor.py" not in human
    assert "frames folded]" in human
    whole = cli("show", "b1", "--full").stdout
    assert "traceback of attempt 1:" in whole
    assert "executor.py" in whole
    assert "in look_up" in whole


def test_a_blocked_sync_handler_does_not_hold_exit_past_shutdown_grace(
    cli: Cli, app_module: str
) -> None:
    env = {"DUETIME_SHUTDOWN_GRACE": "0.5"}
    with running(cli, "worker", "--app", app_module, "--json", env=env) as worker:
        cli.ok("schedule", "stuck", "--delay", "0", "--key", "s1")
        wait_for(lambda: handled(cli) == ["s1"])
        worker.send_signal(signal.SIGTERM)
        # the handler never returns: without the grace, this would wait forever
        stdout, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 0, stderr
    assert json.loads(stdout)["outcomes"] == {"retry": 1}
    timer = cli.ok("show", "s1")["timer"]
    assert (timer["status"], timer["last_error"]) == (
        "retrying",
        "worker shut down before the handler finished",
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_worker_serves_its_metrics_and_health(cli: Cli, app_module: str) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"DUETIME_METRICS_PORT": str(port)}
    with running(cli, "worker", "--app", app_module, env=env) as worker:
        cli.ok("schedule", "greet", "--delay", "0", "--key", "g1")
        cli.ok("schedule", "greet", "--delay", "PT1H", "--key", "later")
        wait_for(lambda: handled(cli) == ["g1"], timeout=30.0)

        def scraped() -> str:
            try:
                return get(f"{base}/metrics")[1]
            except OSError:  # not listening yet
                return ""

        done = 'duetime_attempts_total{namespace="default",outcome="done",type="greet"} 1.0'
        wait_for(lambda: done in scraped())
        text = scraped()
        assert 'duetime_handler_duration_seconds_count{namespace="default",type="greet"} 1.0' in (
            text
        )
        assert 'duetime_attempts_in_flight{namespace="default"} 0.0' in text
        assert 'duetime_timers{namespace="default",status="scheduled"} 1.0' in text
        assert 'duetime_oldest_overdue_seconds{namespace="default"} 0.0' in text
        assert "_created" not in text
        assert get(f"{base}/healthz") == (200, '{"status": "ok"}')
        assert get(f"{base}/readyz") == (200, '{"status": "ok"}')
        assert get(f"{base}/nope")[0] == 404
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=15)
    assert worker.returncode == 0
