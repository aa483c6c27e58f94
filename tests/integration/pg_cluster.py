"""A private PostgreSQL cluster for tests that stop and start the server, or fail it over.

The shared test server (``DUETIME_TEST_PG``) must never be restarted: other tests use it. A test
that needs a server going down and coming back makes its own with ``initdb`` on a free port, in a
fresh directory under the system temp dir, and removes it afterwards. The binaries are found in
``DUETIME_TEST_PG_BIN`` or ``/usr/lib/postgresql/<version>/bin`` or on ``PATH``. PostgreSQL
refuses to run as root, so when the tests run as root the cluster belongs to the ``postgres`` OS
user and every server command runs through ``runuser -u postgres``.

:meth:`PgCluster.standby_of` makes a streaming standby of a running cluster (``pg_basebackup
-R``), and :meth:`PgCluster.promote` turns it into a primary: a failover without a cloud.

Unavailable (no binaries, or root without a ``postgres`` user): :func:`cluster_problem` says why;
tests skip with that reason, or fail when ``CI`` is set, as the store suite does.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
from tests.waiting import wait_until

OS_USER = "postgres"


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (newest installed version first)."""
    candidates: list[Path] = []
    if os.environ.get("DUETIME_TEST_PG_BIN"):
        candidates.append(Path(os.environ["DUETIME_TEST_PG_BIN"]))
    installed = Path("/usr/lib/postgresql")
    if installed.is_dir():
        versions = [p for p in installed.iterdir() if p.name.isdigit()]
        candidates += [p / "bin" for p in sorted(versions, key=lambda p: -int(p.name))]
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


def cluster_problem(*, standby: bool = False) -> str | None:
    """Why a private cluster (with ``standby``: and a standby of it) cannot be made here (None
    when it can)."""
    bindir = find_bindir()
    if bindir is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl); set DUETIME_TEST_PG_BIN"
    if standby and not (bindir / "pg_basebackup").is_file():
        return f"no pg_basebackup in {bindir}; set DUETIME_TEST_PG_BIN"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            return f"running as root and there is no {OS_USER!r} OS user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgCluster:
    """One throw-away cluster: :meth:`create`, then :meth:`start` / :meth:`stop` at will."""

    def __init__(self, bindir: Path, root: Path, port: int) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.logfile = root / "server.log"
        self.port = port
        self._frozen: list[int] = []

    @classmethod
    def _new(cls) -> PgCluster:
        bindir = find_bindir()
        if bindir is None:
            raise RuntimeError(cluster_problem())
        root = Path(tempfile.mkdtemp(prefix="duetime-pg-"))
        if os.geteuid() == 0:
            entry = pwd.getpwnam(OS_USER)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        return cls(bindir, root, free_port())

    @classmethod
    def create(cls, **settings: str) -> PgCluster:
        """A new cluster, not started; ``settings`` go to its postgresql.conf as written."""
        cluster = cls._new()
        try:
            cluster._run(
                "initdb", "-D", str(cluster.data), "-U", "postgres", "-A", "trust",
                "-E", "UTF8", "--no-sync", "--no-instructions",
            )  # fmt: skip
            defaults = {
                "port": str(cluster.port),
                "listen_addresses": "'127.0.0.1'",
                "unix_socket_directories": f"'{cluster.root}'",
                "max_connections": "100",
                "shared_buffers": "'64MB'",
                "fsync": "on",
                "synchronous_commit": "on",
                "log_min_messages": "warning",
            }
            cluster.configure(**{**defaults, **settings})
        except BaseException:
            cluster.remove()
            raise
        return cluster

    @classmethod
    def standby_of(cls, primary: PgCluster, **settings: str) -> PgCluster:
        """A streaming standby of the running ``primary`` (a base backup with ``-R``), not
        started. It does not inherit the primary's ``synchronous_standby_names``: promoted, it
        would wait for a standby of its own that does not exist."""
        cluster = cls._new()
        try:
            cluster._run(
                "pg_basebackup", "-D", str(cluster.data), "-h", "127.0.0.1",
                "-p", str(primary.port), "-U", "postgres", "-X", "stream", "-R", "--no-sync",
            )  # fmt: skip
            cluster.configure(
                port=str(cluster.port),
                unix_socket_directories=f"'{cluster.root}'",
                synchronous_standby_names="''",
                **settings,
            )
        except BaseException:
            cluster.remove()
            raise
        return cluster

    def configure(self, **settings: str) -> None:
        """Append ``settings`` to postgresql.conf (the last of a name wins; read on start)."""
        lines = "".join(f"{name} = {value}\n" for name, value in settings.items())
        conf = self.data / "postgresql.conf"
        self._run("sh", "-c", f"cat >> '{conf}'", stdin=lines)

    def freeze_replication(self) -> None:
        """Freeze this primary's WAL senders (SIGSTOP): a slow or cut link to its standbys. A
        synchronous primary then stops acknowledging commits; an asynchronous one runs ahead of
        its standbys. :meth:`stop` kills frozen senders first: what they held never leaves."""
        with psycopg.connect(self.url(), connect_timeout=5) as conn:
            rows = conn.execute("SELECT pid FROM pg_stat_replication").fetchall()
        if not rows:
            raise RuntimeError("this cluster has no WAL sender (no streaming standby)")
        for (pid,) in rows:
            os.kill(int(pid), signal.SIGSTOP)
            self._frozen.append(int(pid))

    def promote(self) -> None:
        """Turn this standby into a primary; returns once it accepts writes."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "promote")

    def url(self, **params: str) -> str:
        base = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        if not params:
            return base
        return base + "?" + "&".join(f"{name}={value}" for name, value in params.items())

    def start(self, timeout: float = 120.0) -> None:
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-w",
            "-t", str(int(timeout)), "start",
        )  # fmt: skip
        self.wait_ready(timeout)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (clean), or ``immediate`` (like a crash: recovery on start)."""
        for pid in self._frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._frozen.clear()
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def is_running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def wait_ready(self, timeout: float = 120.0) -> None:
        refused: list[str] = []

        def answers() -> bool:
            try:
                with psycopg.connect(self.url(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
            except psycopg.OperationalError as exc:
                refused[:] = [str(exc)]
                return False
            return True

        wait_until(
            answers,
            timeout,
            "the cluster to accept connections",
            every=0.05,
            explain=lambda: f"{refused}\n{self.server_log()}",
        )

    def server_log(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except OSError as exc:
            return f"(no server log: {exc})"

    def remove(self) -> None:
        """Stop the server if it runs (at once) and delete the cluster."""
        if self.is_running():
            with contextlib.suppress(subprocess.CalledProcessError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *args: str, stdin: str | None = None) -> None:
        path = program if program == "sh" else str(self.bindir / program)
        command = [path, *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", OS_USER, "--", *command]
        result = subprocess.run(
            command,
            input=stdin,
            capture_output=True,
            text=True,
            cwd=self.root,
            timeout=60,
        )
        if result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, command, result.stdout, result.stderr
            )


@contextlib.contextmanager
def primary_and_standby(*, sync: bool) -> Iterator[tuple[PgCluster, PgCluster]]:
    """A running primary and a running streaming standby of it, removed afterwards; ``sync``:
    the primary waits for the standby at every commit (``synchronous_standby_names = '*'``)."""
    primary = PgCluster.create(synchronous_standby_names="'*'" if sync else "''")
    standby: PgCluster | None = None
    try:
        primary.start()
        standby = PgCluster.standby_of(primary)
        standby.start()
        yield primary, standby
    finally:
        primary.remove()
        if standby is not None:
            standby.remove()
