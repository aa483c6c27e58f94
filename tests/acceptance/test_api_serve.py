"""``duetime serve`` as a user runs it: a real subprocess on a free port and its own SQLite file.

Also the helpers the other API tests share (:class:`Server`, :func:`make_server`, and
:class:`SharedServers` for a module's tests that each need only namespaces of their own).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from duetime import AsyncApp
from duetime.tenancy.auth import IssuedToken

# The PostgreSQL probe lives beside the store tests; pytest does not put it on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import PG_URL, drop_schema, require_pg, with_params
from tests.children import descendants
from tests.waiting import poll, wait_until

from .conftest import Cli

pytestmark = pytest.mark.slow  # real `duetime serve` processes: start, flags, signals

R = TypeVar("R")

START_TIMEOUT = 120.0
"""How long a server may take to answer its first health check: it answers within seconds,
but a machine busy with other processes may slow its start many times over. Only a server
that never answers waits this long."""

HANDLERS = """
import os
import time

from duetime import App, Dead

app = App(namespace=os.environ.get("DUETIME_TEST_NAMESPACE", "shop"))


def _record(event):
    with open(os.environ["DUETIME_TEST_OUT"], "a") as out:
        out.write(event.key + "\\n")


@app.handler("followup.email")
def followup(event):
    _record(event)


@app.handler("slow.job")
def slow(event):
    time.sleep(float(event.payload.get("seconds", 1)))
    _record(event)


@app.handler("doomed")
def doomed(event):
    raise Dead("this one never works")
"""


@functools.cache
def duetime_command() -> tuple[str, ...]:
    """The console script once the CLI lists ``serve``; ``python -m duetime.api`` until then."""
    script = Path(sys.executable).parent / "duetime"
    if script.exists():
        probe = subprocess.run([str(script), "serve", "--help"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return (str(script),)
    return (sys.executable, "-m", "duetime.api")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    """One ``duetime serve`` process; ``client(token)`` talks to it like any HTTP client."""

    cwd: Path
    env: dict[str, str]
    port: int
    host: str = "127.0.0.1"
    process: subprocess.Popen[str] | None = None
    log_path: Path = field(default_factory=Path)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def out_path(self) -> Path:
        return self.cwd / "fired.txt"

    def fired(self) -> list[str]:
        """Keys the test handlers have run, in order."""
        if not self.out_path.exists():
            return []
        return self.out_path.read_text().split()

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=10)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*duetime_command(), *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
        )

    def shell(self) -> Cli:
        """The ``duetime`` command on this server's database, run in this process through its own
        entry point (:class:`Cli`): for tests of what a command says, not of its process."""
        cli = Cli(self.cwd)
        cli.env["DUETIME_DATABASE_URL"] = self.env["DUETIME_DATABASE_URL"]
        return cli

    def create_token(self, *namespaces: str, read_only: bool = False) -> str:
        """A token made by the real ``duetime tokens create`` command, in a process of its own
        (for the tests about that command; :meth:`issue_token` for a token a test just needs)."""
        args = ["tokens", "create", "--json"]
        for namespace in namespaces:
            args += ["--namespace", namespace]
        if read_only:
            args.append("--read-only")
        done = self.cli(*args)
        assert done.returncode == 0, done.stderr
        token: str = json.loads(done.stdout)["token"]
        return token

    def issue_token(
        self, *namespaces: str, read_only: bool = False, name: str | None = None
    ) -> IssuedToken:
        """A token made in this process through the Python API, on the server's database: the
        same rows the command writes, without starting a Python process to write them."""

        async def issue() -> IssuedToken:
            app = AsyncApp(self.env["DUETIME_DATABASE_URL"])  # opened as the command opens it:
            try:  # without making its own namespace (default) as well
                return await app.tokens.issue(namespaces, read_only=read_only, name=name)
            finally:
                await app.close()

        return run_async(issue())

    def start(self, *args: str) -> Server:
        self.log_path = self.cwd / f"serve-{self.port}.log"
        log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [*duetime_command(), "serve", "--host", self.host, "--port", str(self.port), *args],
            cwd=self.cwd,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_until(
                self._answers,
                START_TIMEOUT,
                "duetime serve to answer /healthz",
                every=0.05,
                explain=self.log,
            )
        except BaseException:  # failed, timed out or interrupted: no server is left running
            self.stop(signal.SIGKILL, timeout=START_TIMEOUT)
            raise
        return self

    def _answers(self) -> bool:
        """Whether the server answers its health check; fails at once once it has exited."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"serve exited {self.process.returncode}:\n{self.log()}")
        try:
            return httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process = None
        return code


def run_async(coroutine: Coroutine[Any, Any, R]) -> R:
    """Run ``coroutine`` to its end on an event loop of its own, on a thread of its own: callable
    from any test, even one whose thread already runs a loop (Playwright's)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def make_server(tmp_path: Path, name: str = "server") -> Server:
    cwd = tmp_path / name
    cwd.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env["DUETIME_DATABASE_URL"] = f"sqlite:///{cwd / 'duetime.db'}"
    env["DUETIME_TEST_OUT"] = str(cwd / "fired.txt")
    (cwd / "handlers.py").write_text(HANDLERS)
    return Server(cwd=cwd, env=env, port=free_port())


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[Server]]:
    """Servers a test started; each is stopped (SIGTERM) at the end."""
    started: list[Server] = []
    try:
        yield started
    finally:
        for server in started:
            server.stop()


class SharedServers:
    """One ``duetime serve`` a store (``sqlite``; ``postgres``, on a schema of its own), started
    with ``args`` when a test first asks for that store, and shared by a module's tests.

    A server's start costs seconds of CPU; most tests need only rows of their own. So each test
    that shares one keeps to namespaces no other test uses (a fresh name each), and sees its
    own rows only. Tests about a server's start, flags, signals or shutdown start their own.
    """

    def __init__(
        self,
        tmp_path_factory: pytest.TempPathFactory,
        *args: str,
        before_start: Callable[[Server], object] | None = None,
    ) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.args = args
        self.before_start = before_start
        self.started: dict[str, Server] = {}
        self.schemas: list[str] = []

    def __call__(self, store: str) -> Server:
        if store not in self.started:
            server = make_server(self.tmp_path_factory.mktemp(store))
            if store == "postgres":
                require_pg()
                schema = f"t_{uuid.uuid4().hex[:16]}"
                self.schemas.append(schema)
                server.env["DUETIME_DATABASE_URL"] = with_params(PG_URL, schema=schema)
            try:
                if self.before_start is not None:
                    self.before_start(server)
                server.start(*self.args)
            except BaseException:
                server.stop()
                raise
            self.started[store] = server
        return self.started[store]

    def stop(self) -> None:
        """Stop every server (SIGTERM: each must exit 0), then drop the schemas."""
        try:
            codes = {store: server.stop() for store, server in self.started.items()}
        finally:
            for schema in self.schemas:
                drop_schema(schema)
        for store, code in codes.items():
            assert code == 0, self.started[store].log()


def fresh_namespace(prefix: str) -> str:
    """A namespace name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_for(check: Any, timeout: float = 60.0, interval: float = 0.05) -> Any:
    """Poll ``check()`` until it returns something truthy; fail after ``timeout`` seconds."""
    return poll(check, timeout, str(check), every=interval)


class Tokens:
    """The tokens of a secured server: rw/ro for alpha, rw for beta, and one for every ns.

    Made in this process: they are the tests' set-up, not the command under test (that is
    ``test_api_auth``'s revocation test, which creates its token with ``duetime tokens``)."""

    def __init__(self, server: Server) -> None:
        self.alpha = server.issue_token("alpha").secret
        self.alpha_ro = server.issue_token("alpha", read_only=True).secret
        self.beta = server.issue_token("beta").secret
        self.admin = server.issue_token("*").secret


def secured_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Tokens]]:
    """A server with auth on by default because tokens exist (no --auth flag), no worker."""
    server = make_server(tmp_path_factory.mktemp("secured"))
    tokens = Tokens(server)
    server.start("--no-worker")
    yield server, tokens
    assert server.stop() == 0, server.log()


# -- serve itself ----------------------------------------------------------------------------
def test_a_server_that_never_answers_is_stopped_when_its_start_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start that fails leaves no server running (it would hold its port, database and
    connections after the suite). Its app hangs on import, so the server never answers."""
    server = make_server(tmp_path)
    (server.cwd / "hangs.py").write_text("import threading\nthreading.Event().wait()\n")
    monkeypatch.setattr(sys.modules[__name__], "START_TIMEOUT", 1.0)
    with pytest.raises(AssertionError, match=r"timed out .* duetime serve to answer"):
        server.start("--app", "hangs:app")
    assert server.process is None
    assert not [line for line in descendants().values() if str(server.port) in line]


def test_serve_answers_health_docs_dashboard_and_metrics(
    tmp_path: Path, servers: list[Server]
) -> None:
    server = make_server(tmp_path)
    servers.append(server.start("--no-worker"))
    with server.client() as client:
        health = client.get("/healthz")
        assert health.json() == {"status": "ok", "schema_version": health.json()["schema_version"]}
        assert client.get("/v1/info").json()["auth"] is False
        spec = client.get("/openapi.json").json()
        assert "/v1/namespaces/{namespace}/timers" in spec["paths"]
        assert client.get("/docs").status_code == 200
        page = client.get("/")
        assert page.status_code == 200
        assert "duetime" in page.text
        assert client.get("/static/app.js").status_code == 200
        metrics = client.get("/metrics")
        assert metrics.status_code == 200
        assert metrics.headers["content-type"].startswith("text/plain")
        nodes = client.get("/v1/nodes").json()["items"]
        assert [node["role"] for node in nodes] == ["api"]
        assert nodes[0]["alive"] is True


def test_root_path_puts_the_proxys_prefix_in_every_link(
    tmp_path: Path, servers: list[Server]
) -> None:
    """Behind a proxy that serves it at /duetime and strips that: uvicorn puts the prefix back
    in front of each path, so the routes still match and /docs links below it."""
    server = make_server(tmp_path)
    servers.append(server.start("--no-worker", "--root-path", "/duetime/"))
    with server.client() as client:
        docs = client.get("/docs")
        assert docs.status_code == 200
        assert "/duetime/docs-assets/swagger-ui-bundle.js" in docs.text
        assert "'/duetime/openapi.json'" in docs.text
        assert client.get("/openapi.json").json()["servers"] == [{"url": "/duetime"}]
        assert client.get("/docs-assets/swagger-ui.css").status_code == 200
        assert client.get("/static/app.js").status_code == 200
        made = client.post("/v1/namespaces/default/timers", json={"type": "t", "delay": "P1D"})
        assert made.status_code == 201, made.text
    refused = server.cli("serve", "--root-path", "duetime")
    assert refused.returncode != 0
    assert "root_path" in refused.stderr


def test_sigterm_lets_the_in_flight_handler_finish_and_exits_zero(
    tmp_path: Path, servers: list[Server]
) -> None:
    server = make_server(tmp_path)
    servers.append(server.start("--app", "handlers:app"))
    with server.client() as client:
        body = {"type": "slow.job", "key": "slow-1", "payload": {"seconds": 1.5}}
        assert client.post("/v1/namespaces/shop/events", json=body).status_code == 201
        wait_for(
            lambda: (
                client.get("/v1/namespaces/shop/timers/slow-1").json()["timer"]["status"]
                == "running"
            )
        )
    assert server.stop() == 0, server.log()
    assert server.fired() == ["slow-1"]
    server.port = free_port()
    server.start("--no-worker")
    with server.client() as client:
        timer = client.get("/v1/namespaces/shop/timers/slow-1").json()["timer"]
        assert timer["status"] == "done"
        assert client.get("/v1/nodes").json()["items"][0]["role"] == "api"  # workers left


def test_refuses_a_non_loopback_bind_without_auth(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    done = subprocess.run(
        [*duetime_command(), "serve", "--host", "0.0.0.0", "--port", str(server.port), "--no-auth"],
        cwd=server.cwd,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "without auth" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_non_loopback_bind_turns_auth_on(tmp_path: Path, servers: list[Server]) -> None:
    server = make_server(tmp_path)
    server.host = "0.0.0.0"
    servers.append(server.start("--no-worker"))
    with server.client() as client:
        assert client.get("/v1/info").json()["auth"] is True
        denied = client.get("/v1/namespaces")
        assert denied.status_code == 401
        assert denied.json()["code"] == "unauthorized"
