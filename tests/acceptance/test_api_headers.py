"""A request's head is bounded: size, number of lines, and the time it takes to arrive.

Raw sockets against a real ``duetime serve``, since an HTTP client library would refuse to
send what an attacker sends.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from duetime.api.http_limits import MAX_HEADER_BYTES, MAX_HEADERS

from .test_api_serve import Server, make_server

HEAD_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = make_server(tmp_path_factory.mktemp("headers"))
    server.start("--no-worker", "--head-timeout", str(HEAD_TIMEOUT))
    yield server
    assert server.stop() == 0, server.log()


def connect(server: Server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    return sock


def send_all(sock: socket.socket, chunks: Iterator[bytes]) -> int:
    """Send until the server stops reading (it answered and closed); the bytes sent."""
    sent = 0
    try:
        for chunk in chunks:
            sock.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return sent


def answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body the server sent before it closed the connection."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, body


def test_a_huge_header_is_refused_with_431_before_it_is_all_sent(server: Server) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        megabyte = b"a" * (1 << 20)
        sent = send_all(sock, (megabyte for _ in range(100)))  # 100 MB, if it were all read
        status, headers, body = answer(sock)
    assert status == 431
    assert headers["connection"] == "close"
    assert json.loads(body)["code"] == "headers_too_large"
    assert sent < 50 * (1 << 20), "the server read on long after the limit"


def test_too_many_headers_are_refused_with_431(server: Server) -> None:
    lines = b"".join(b"X-H%d: v\r\n" % i for i in range(MAX_HEADERS + 1))
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + lines + b"\r\n")
        status, _, body = answer(sock)
    assert status == 431
    assert json.loads(body)["field"] == "headers"


def test_headers_dripped_slowly_are_cut_off_with_408(server: Server) -> None:
    with connect(server) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for _ in range(100):  # a header line now and then, never the blank line
            try:
                sock.sendall(b"X-Drip: 1\r\n")
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.05)
            if time.monotonic() - started > 20:
                break
        status, _, body = answer(sock)
    assert status == 408
    assert json.loads(body)["code"] == "request_timeout"


def test_a_silent_connection_is_closed_after_the_head_timeout(server: Server) -> None:
    with connect(server) as sock:
        sock.settimeout(HEAD_TIMEOUT + 20)
        status, _, _ = answer(sock)  # sends nothing at all
    assert status == 408


def test_requests_within_the_bounds_are_answered(server: Server) -> None:
    headers = {f"X-H{i}": "v" for i in range(MAX_HEADERS - 10)}
    headers["X-Big"] = "a" * (MAX_HEADER_BYTES - 8 * 1024)
    body = json.dumps({"type": "x", "delay": "P1D", "payload": {str(i): i for i in range(500)}})
    pretty = json.dumps(json.loads(body), indent=1).encode()  # many lines, in the same read
    assert pretty.count(b"\n") > MAX_HEADERS * 3
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        assert client.get("/healthz", headers=headers).status_code == 200
        made = client.post(
            "/v1/namespaces/default/timers",
            content=pretty,
            headers={"Content-Type": "application/json"},
        )
        assert made.status_code == 201, made.text
        for _ in range(3):  # a kept-alive connection: each request gets its own bounds
            assert client.get("/healthz", headers=headers).status_code == 200
