"""The shell examples of the README and docs/, run against a real ``duetime serve``: docs that
cannot go stale.

A fenced block is run when an HTML comment (invisible once rendered) comes right before it:

- ``<!-- doc-test: run -->``: a bash block, run as a script (``set -euo pipefail``; ``curl``
  fails on an HTTP error). A block of ``$ command`` lines, each followed by its output, is run
  command by command and each output compared with the one shown.
- ``<!-- doc-test: run until REGEX -->``: run again until its output matches (a timer firing).
- ``<!-- doc-test: file NAME -->``: the block is written to NAME first (``myapp.py``).
- ``<!-- doc-test: serve -->``: the block's one ``duetime serve …`` command is started in the
  background; without one, plain ``duetime serve`` runs before the first example.
- ``<!-- doc-test: python -->``: a Python block, run in the page's one Python process: the
  page's Python blocks share their names, as a reader who pastes them one after another does.
- ``<!-- doc-test: fragment REASON -->``: a block that needs what the page does not give (a
  Django project, your own mail client): only parsed (Python) or syntax-checked (``bash -n``).
- ``<!-- doc-test: skip REASON -->``: a block that is not run here (it installs packages, runs
  until stopped, or needs another machine); the reason is required.

Every shell and Python block of a page carries one of these markers
(:func:`test_every_runnable_block_is_marked`), so a new example is run, or said not to be, by
whoever adds it; blocks of output, JSON and configuration files need none.

Each page runs in an empty directory of its own with its own SQLite database. The server listens
on a free port of 127.0.0.1, put in place of every ``8080`` of the page (and in
``DUETIME_PORT``); ``./duetime`` and ``duetime`` are the installed command.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from tests.waiting import wait_until

from .test_api_serve import duetime_command, free_port

pytestmark = pytest.mark.slow  # runs the documents' commands as a user would

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(
    r"^<!--\s*doc-test:\s*(?P<what>run|file|serve|python|fragment|skip)\b(?P<arg>.*?)\s*-->\s*$"
)
RUNNABLE = {"bash", "sh", "shell", "console", "python", "py"}
"""The languages of blocks that must carry a marker: the rest are output, data or configuration."""
FENCE = re.compile(r"^(?P<fence>```+)(?P<info>[^`]*)$")
UNTIL = 60.0
"""Seconds a ``run until`` example may take to show what it waits for."""
PYTHON_DRIVER = r"""
import contextlib, io, json, sys, traceback

names = {"__name__": "__main__"}
answers = sys.stdout
for line in sys.stdin:
    out = io.StringIO()
    ok = True
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            exec(compile(json.loads(line), "<block>", "exec"), names)
        except BaseException:
            ok = False
            traceback.print_exc()
    answers.write(json.dumps({"ok": ok, "output": out.getvalue()}) + "\n")
    answers.flush()
"""
"""The page's Python process: runs each block it is sent in one namespace, answers a line each."""
PYTHON_BLOCK_SECONDS = 60.0
PREAMBLE = """set -euo pipefail
curl() { command curl --silent --show-error --fail-with-body "$@"; echo; }
"""


@dataclass(frozen=True)
class Example:
    """One marked block: what to do with it, its argument, its language, text and line."""

    what: str
    arg: str
    text: str
    line: int
    language: str = ""


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, with the marker before it (None when it has none)."""

    language: str
    line: int
    marker: Example | None


def blocks(markdown: str) -> list[Block]:
    """Every fenced block of a page, in order; a marker not followed by a fence is an error."""
    lines = markdown.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i])
        fence = FENCE.match(lines[i])
        if marker is not None:
            i += 1
            fence = FENCE.match(lines[i]) if i < len(lines) else None
            if fence is None:
                raise AssertionError(f"line {i}: a doc-test marker must come right before a fence")
        if fence is None:
            i += 1
            continue
        start = i + 1
        end = start
        while not lines[end].startswith(fence["fence"]):
            end += 1
        language = fence["info"].strip().split(" ")[0]
        example = None
        if marker is not None:
            text = "\n".join(lines[start:end])
            example = Example(marker["what"], marker["arg"].strip(), text, i, language)
        found.append(Block(language, i + 1, example))
        i = end + 1
    return found


def examples(markdown: str) -> list[Example]:
    """The marked blocks of a page, in order."""
    return [block.marker for block in blocks(markdown) if block.marker is not None]


def console_steps(text: str) -> list[tuple[str, str]] | None:
    """``$ command`` lines with the output each shows, or None for a plain script."""
    if not text.startswith("$ "):
        return None
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return [(command, "\n".join(output)) for command, output in steps]


@dataclass
class Session:
    """A page's directory, environment and server."""

    cwd: Path
    env: dict[str, str]
    port: int
    server: subprocess.Popen[str] | None = None
    python: subprocess.Popen[str] | None = None

    def run_python(self, code: str) -> tuple[bool, str]:
        """Run one block in the page's Python process: whether it raised nothing, and its output."""
        if self.python is None:
            self.python = subprocess.Popen(
                [sys.executable, "-u", "-c", PYTHON_DRIVER],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        assert self.python.stdin is not None
        assert self.python.stdout is not None
        self.python.stdin.write(json.dumps(code) + "\n")
        self.python.stdin.flush()
        ready, _, _ = select.select([self.python.stdout], [], [], PYTHON_BLOCK_SECONDS)
        if not ready:
            self.python.kill()
            return False, f"no answer within {PYTHON_BLOCK_SECONDS:.0f} s"
        line = self.python.stdout.readline()
        if not line:
            return False, "the Python process ended"
        answer = json.loads(line)
        return bool(answer["ok"]), str(answer["output"])

    def stop_python(self) -> None:
        if self.python is None:
            return
        assert self.python.stdin is not None
        self.python.stdin.close()
        try:
            self.python.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.python.kill()
            self.python.wait()

    def substitute(self, text: str) -> str:
        return text.replace("8080", str(self.port))

    def bash(self, script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", PREAMBLE + script],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def serve(self, command: str) -> None:
        log = (self.cwd / "serve.log").open("w")
        self.server = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.cwd,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        server = self.server

        def answers() -> bool:
            if server.poll() is not None:
                raise AssertionError(f"{command!r} exited:\n{self.log()}")
            try:
                return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).is_success
            except httpx.TransportError:
                return False

        wait_until(answers, 120, f"{command!r} to answer", every=0.05, explain=self.log)

    def log(self) -> str:
        path = self.cwd / "serve.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> int:
        self.stop_python()
        if self.server is None:
            return 0
        self.server.send_signal(signal.SIGTERM)
        try:
            return self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            return self.server.wait()


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    port = free_port()
    env["DUETIME_DATABASE_URL"] = f"sqlite:///{tmp_path / 'duetime.db'}"
    env["DUETIME_PORT"] = str(port)
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    command = duetime_command()
    launcher = "#!/bin/sh\nexec " + " ".join(f"'{part}'" for part in command) + ' "$@"\n'
    for path in (bin_dir / "duetime", tmp_path / "duetime"):
        path.write_text(launcher)
        path.chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    session = Session(tmp_path, env, port)
    yield session
    assert session.stop() == 0, session.log()


def marked_pages() -> list[Path]:
    return [page for page in PAGES if "<!-- doc-test:" in page.read_text(encoding="utf-8")]


def test_the_marked_pages_include_the_readme_and_the_curl_examples() -> None:
    names = {page.relative_to(ROOT).as_posix() for page in marked_pages()}
    assert {"README.md", "docs/bus.md", "docs/flow-control.md", "docs/operating.md"} <= names


@pytest.mark.parametrize("page", marked_pages(), ids=lambda page: page.relative_to(ROOT).as_posix())
def test_the_shell_examples_run(page: Path, session: Session) -> None:
    for example in examples(page.read_text(encoding="utf-8")):
        where = f"{page.name}:{example.line + 1}"
        text = session.substitute(example.text)
        if example.what == "file":
            (session.cwd / example.arg).write_text(text + "\n")
            continue
        if example.what == "serve":
            assert session.server is None, f"{where}: one server a page"
            session.serve(text.split("#")[0].strip())
            continue
        if example.what == "python":
            ok, output = session.run_python(text)
            assert ok, f"{where}:\n{text}\n{output}"
            continue
        if example.what in ("fragment", "skip"):
            continue  # test_docs_marked.py checks what can be checked of them
        if session.server is None:
            session.serve("duetime serve")
        run(session, example, text, where)


def same_output(printed: str, shown: str) -> bool:
    """Whether a command printed what the page shows: the same JSON value (a page may wrap a
    long line), or the same lines but for the spaces that end them (a table's padding)."""
    try:
        return bool(json.loads(printed) == json.loads(shown))
    except ValueError:
        pass
    lines = [line.rstrip() for line in printed.rstrip().splitlines()]
    return lines == [line.rstrip() for line in shown.rstrip().splitlines()]


def run(session: Session, example: Example, text: str, where: str) -> None:
    steps = console_steps(text)
    if steps is not None:
        for command, shown in steps:
            done = session.bash(command)
            assert done.returncode == 0, f"{where}: {command}\n{done.stderr}{session.log()}"
            assert same_output(done.stdout, shown), f"{where}: {command}\n{done.stdout}"
        return
    wanted = re.compile(example.arg[len("until") :].strip().strip("\"'")) if example.arg else None
    last: list[str] = [""]

    def shows() -> bool:
        done = session.bash(text)
        assert done.returncode == 0, f"{where}:\n{text}\n{done.stdout}{done.stderr}"
        last[0] = done.stdout
        return wanted is None or bool(wanted.search(done.stdout))

    pattern = "" if wanted is None else wanted.pattern
    wait_until(shows, UNTIL, f"{where}: {pattern!r}", every=0.2, explain=lambda: last[0])
