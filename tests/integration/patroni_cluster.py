"""A private Patroni cluster: one etcd and three PostgreSQL servers on loopback ports.

For tests (and bench/patroni_failover.py) that fail a highly available PostgreSQL over the way
production does: Patroni, not the test, promotes a standby, and ``synchronous_mode`` keeps one
standby synchronous. Everything lives in a fresh directory under the system temp dir, on free
loopback ports; :meth:`PatroniCluster.remove` kills every process it started by process group
(each Patroni and etcd in a session of its own, each postmaster in the one Patroni gives it)
and deletes the directory, whatever happened.

Readiness is read from Patroni's REST API (``GET /cluster``): a leader ``running``, a
``sync_standby``, every member up, and a write through the multi-host URL that commits. The
programs are Debian's ``patroni`` and ``etcd-server`` packages; PostgreSQL's binaries are
found as in pg_cluster.py. As root, Patroni runs as the ``postgres`` OS user (the server
refuses root). :func:`patroni_problem` says why the cluster cannot run here (None when it can).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from pg_cluster import OS_USER, cluster_problem, find_bindir, free_port
from tests.waiting import poll

SCOPE = "duetime"
DCS = {
    "ttl": 10,
    "loop_wait": 1,
    "retry_timeout": 4,
    "maximum_lag_on_failover": 1048576,
    "primary_start_timeout": 0,
    "synchronous_mode": True,
}
"""The cluster-wide settings (see docs/operating.md, "High availability"): a leader key that
lives 10 s, Patroni's loop every second, and a primary whose server crashed is failed over at
once (``primary_start_timeout: 0``) to the synchronous standby rather than restarted."""

DCS_POSTGRESQL = {
    "use_pg_rewind": True,
    "parameters": {
        "wal_log_hints": "on",
        "max_connections": 100,
        "max_wal_senders": 10,
        "max_replication_slots": 10,
        "wal_keep_size": "128MB",
    },
}
"""The servers' shared settings: ``pg_rewind`` (which needs ``wal_log_hints``) lets a failed
primary rejoin as a standby of the new one."""

UP = frozenset({"running", "streaming"})


def patroni_problem() -> str | None:
    """Why a Patroni cluster cannot run here (None when it can)."""
    missing = [name for name in ("patroni", "etcd") if shutil.which(name) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (apt-get install patroni etcd-server)"
    return cluster_problem(standby=True)


@dataclass
class Node:
    name: str
    root: Path
    pg_port: int
    rest_port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "patroni.log"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


class PatroniCluster:
    """:meth:`start` once, then fail it over; :meth:`remove` always (see :func:`patroni`)."""

    def __init__(self, root: Path, size: int = 3) -> None:
        self.root = root
        self.etcd_port = free_port()
        self.etcd_peer = free_port()
        self.etcd: subprocess.Popen[bytes] | None = None
        self.nodes = [
            Node(f"pg{i}", root / f"pg{i}", free_port(), free_port()) for i in range(1, size + 1)
        ]

    def url(self, **params: str) -> str:
        """The multi-host URL duetime uses: every server, the writable one wanted."""
        hosts = ",".join(f"127.0.0.1:{node.pg_port}" for node in self.nodes)
        query = {"target_session_attrs": "read-write", "connect_timeout": "2", **params}
        return f"postgresql://postgres@{hosts}/postgres?" + "&".join(
            f"{k}={v}" for k, v in query.items()
        )

    # -- start and stop -------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> None:
        self._start_etcd()
        poll(self._etcd_healthy, 30, "etcd to answer", every=0.1, explain=self._etcd_log)
        for node in self.nodes:
            self._start_node(node)
        self.wait_healthy(timeout)

    def leftovers(self) -> list[int]:
        """Processes of this cluster still running: in the session of a Patroni or of etcd, or
        naming its directory (a postmaster, in a session of its own)."""
        sessions = frozenset(p.pid for p in [self.etcd, *(n.proc for n in self.nodes)] if p)
        return [pid for pid in _processes_under(self.root, sessions) if pid != os.getpid()]

    def remove(self) -> None:
        """Kill everything (process groups, then any process still running from this
        cluster's directory) and delete the directory."""
        for node in self.nodes:
            _kill_group(node.proc)
            pid = node.postmaster_pid()
            if pid is not None:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
        _kill_group(self.etcd)
        for pid in self.leftovers():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- state ------------------------------------------------------------------------------------
    def members(self) -> list[dict[str, Any]]:
        """``GET /cluster`` from the first node that answers ([] when none does)."""
        for node in self.nodes:
            with contextlib.suppress(OSError, ValueError):
                return list(self._rest(node, "GET", "/cluster").get("members", []))
        return []

    def leader(self) -> Node | None:
        for member in self.members():
            if member.get("role") == "leader" and member.get("state") in UP:
                return self.node(member["name"])
        return None

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def healthy(self, count: int | None = None) -> bool:
        """A running leader, a synchronous standby, ``count`` members up (default: all)."""
        members = self.members()
        roles = {m.get("role") for m in members if m.get("state") in UP}
        up = sum(1 for m in members if m.get("state") in UP)
        return {"leader", "sync_standby"} <= roles and up >= (count or len(self.nodes))

    def accepts_writes(self) -> bool:
        """A write through the multi-host URL commits (on the leader, waited for by its
        synchronous standby when it has one)."""
        try:
            with psycopg.connect(self.url(connect_timeout="1"), autocommit=True) as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS ha_probe (at timestamptz)")
                conn.execute("INSERT INTO ha_probe VALUES (clock_timestamp())")
        except psycopg.Error:
            return False
        return True

    def wait_healthy(self, timeout: float = 120.0, count: int | None = None) -> None:
        poll(
            lambda: self.healthy(count) and self.accepts_writes(),
            timeout,
            "a Patroni leader with a synchronous standby, taking writes",
            every=0.2,
            explain=self.explain,
        )

    def explain(self) -> str:
        logs = "\n".join(f"--- {n.name}\n{_tail(n.log)}" for n in self.nodes)
        return f"members: {json.dumps(self.members())}\n{logs}"

    # -- faults ---------------------------------------------------------------------------------
    def kill_leader_postmaster(self) -> Node:
        """``kill -9`` the leader's postmaster (its backends follow): a crashed server."""
        leader = self.leader()
        if leader is None:
            raise RuntimeError(f"no leader to kill:\n{self.explain()}")
        pid = leader.postmaster_pid()
        if pid is None:
            raise RuntimeError(f"{leader.name} has no postmaster.pid")
        os.kill(pid, signal.SIGKILL)
        return leader

    def switchover(self) -> Node:
        """A planned switchover through the leader's REST API (``POST /switchover``) to the
        synchronous standby; returns the old leader once Patroni has accepted it."""
        leader = self.leader()
        sync = [m["name"] for m in self.members() if m.get("role") == "sync_standby"]
        if leader is None or not sync:
            raise RuntimeError(f"no leader and synchronous standby:\n{self.explain()}")
        self._rest(leader, "POST", "/switchover", {"leader": leader.name, "candidate": sync[0]})
        return leader

    def wait_new_leader(self, old: Node, timeout: float = 60.0) -> Node:
        """Until a member other than ``old`` leads and a write commits; returns it."""

        def moved() -> Node | None:
            leader = self.leader()
            return leader if leader not in (None, old) and self.accepts_writes() else None

        return poll(moved, timeout, f"a new leader after {old.name}", 0.05, self.explain)

    # -- pieces -----------------------------------------------------------------------------------
    def _start_etcd(self) -> None:
        data = self.root / "etcd"
        peer = f"http://127.0.0.1:{self.etcd_peer}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        command = [
            "etcd", "--name", "etcd0", "--data-dir", str(data),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"etcd0={peer}", "--initial-cluster-state", "new",
            "--log-level", "warn",
        ]  # fmt: skip
        self.etcd = _spawn(command, self.root / "etcd.log", user=False)

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health", timeout=1):
                return True
        except OSError:
            return False

    def _etcd_log(self) -> str:
        return _tail(self.root / "etcd.log")

    def _start_node(self, node: Node) -> None:
        node.root.mkdir()
        _own(node.root)
        config = self.root / f"{node.name}.json"  # JSON is YAML: no YAML writer needed
        config.write_text(json.dumps(self._config(node), indent=1))
        _own(config)
        node.proc = _spawn(["patroni", str(config)], node.log, user=True)

    def _config(self, node: Node) -> dict[str, Any]:
        bindir = find_bindir()
        trust = ["local all all trust", "host all all 127.0.0.1/32 trust",
                 "host replication all 127.0.0.1/32 trust"]  # fmt: skip
        return {
            "scope": SCOPE,
            "name": node.name,
            "log": {"level": "INFO"},
            "restapi": {
                "listen": f"127.0.0.1:{node.rest_port}",
                "connect_address": f"127.0.0.1:{node.rest_port}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {
                "dcs": {**DCS, "postgresql": DCS_POSTGRESQL},
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.pg_port}",
                "connect_address": f"127.0.0.1:{node.pg_port}",
                "data_dir": str(node.data),
                "bin_dir": str(bindir),
                "pgpass": str(node.root / "pgpass"),
                "pg_hba": trust,
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "postgres"},
                    "rewind": {"username": "postgres"},
                },
                "parameters": {
                    "unix_socket_directories": str(node.root),
                    "shared_buffers": "64MB",
                    "fsync": "on",
                    "log_min_messages": "warning",
                },
            },
        }

    def _rest(
        self, node: Node, method: str, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{node.rest_port}{path}", data=data, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {path} on {node.name}: {exc.read().decode()}") from exc
        try:
            return dict(json.loads(text))
        except ValueError:
            return {"text": text}


def _own(path: Path) -> None:
    """Hand ``path`` to the server's OS user when running as root."""
    if os.geteuid() == 0:
        entry = pwd.getpwnam(OS_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _spawn(command: list[str], log: Path, *, user: bool) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own (so its whole group can be killed), its
    output to ``log``; as the server's OS user when ``user`` and running as root."""
    if user and os.geteuid() == 0:
        command = ["runuser", "-u", OS_USER, "--", *command]
    with log.open("ab") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=log.parent, start_new_session=True,
        )  # fmt: skip


def _kill_group(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        return
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _processes_under(root: Path, sessions: frozenset[int] = frozenset()) -> list[int]:
    """The processes whose command line names ``root`` (a postmaster Patroni started with
    ``-D`` in it, or any helper left behind) or that belong to one of ``sessions``, by /proc."""
    found = []
    needle = str(root).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            session = int(stat.rsplit(")", 1)[1].split()[3])
            if session in sessions or needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"(no log: {exc})"


@contextlib.contextmanager
def patroni() -> Iterator[PatroniCluster]:
    """A started cluster, removed afterwards whatever happens."""
    problem = patroni_problem()
    if problem is not None:
        raise RuntimeError(problem)
    root = Path(tempfile.mkdtemp(prefix="duetime-patroni-"))
    _own(root)
    cluster = PatroniCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()
        # A backend whose postmaster was killed leaves by itself, within moments.
        poll(lambda: not cluster.leftovers(), 30, "the cluster's processes to end", 0.1,
             lambda: f"still running: {cluster.leftovers()}")  # fmt: skip
