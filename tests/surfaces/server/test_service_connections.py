"""`memorist serve` under slow clients, as a real process with 1,024 descriptors: a
flood of idle, half-sent-header and slow-body connections does not stop /healthz or
adds, and the head and body deadlines close what trickles."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_service_process import free_port, stop

NOFILE = 1024
FLOOD = 1100
HEADS = [
    b"",
    b"POST /api/memories/ HTTP/1.1\r\nHost: localhost\r\nX-Slow: ",
    b"POST /api/memories/ HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
]


def serve(db: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))

    proc = subprocess.Popen(
        [sys.executable, "-m", "memorist", "--db", str(db), "--embedder", "hashing", "serve", "--create", "--port", str(port),
         "--no-access-log", "--log-level", "critical", "--rate-limit", "off", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=limit,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "MEMORY_"))},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc, port
        except httpx.TransportError:
            time.sleep(0.1)
    stop(proc)
    pytest.fail("memorist serve did not start")


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2 * FLOOD + 200:
        pytest.fail(f"this test opens {FLOOD} sockets: raise the hard descriptor limit ({hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (2 * FLOOD + 200 if hard == resource.RLIM_INFINITY else hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_slow(port: int, i: int) -> socket.socket:
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    head = HEADS[i % 3]
    if head:
        time.sleep(0)
        with contextlib.suppress(OSError):
            s.send(head)
    return s


def test_a_flood_of_slow_connections_leaves_health_and_adds_answering(tmp_path: Path, many_descriptors: None) -> None:
    proc, port = serve(tmp_path / "flood.db")
    socks = [open_slow(port, i) for i in range(FLOOD)]
    stopping = threading.Event()

    def attacker() -> None:  # keeps the flood up: reopens what the server closes, trickles a byte a second
        while not stopping.wait(0.5):
            for i, s in enumerate(socks):
                try:
                    closed = s.recv(4096) == b""
                except BlockingIOError:
                    closed = False
                except OSError:
                    closed = True
                if not closed and i % 3:
                    try:
                        s.send(b"a")
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed = True
                if closed:
                    s.close()
                    socks[i] = open_slow(port, i)

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        time.sleep(2)
        for i in range(5):
            t = time.monotonic()
            assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200
            added = httpx.post(f"{base}/api/memories/", timeout=10, json={
                "messages": [{"role": "user", "content": f"I like tea number {i}"}], "user_id": "alex", "infer": False})
            assert added.status_code == 200, added.text
            assert time.monotonic() - t < 10
        fds = len(os.listdir(f"/proc/{proc.pid}/fd")) if Path(f"/proc/{proc.pid}/fd").is_dir() else 0
        assert fds < NOFILE - 32, fds  # the cap keeps descriptors free
    finally:
        stopping.set()
        thread.join(timeout=10)
        for s in socks:
            s.close()
        stop(proc)


def closed_by_server(s: socket.socket) -> bool:
    """The server closed ``s`` (an end of stream or a reset), with nothing sent."""
    try:
        return s.recv(100) == b""
    except ConnectionResetError:
        return True


def test_heads_and_bodies_that_trickle_are_cut_off(tmp_path: Path) -> None:
    proc, port = serve(tmp_path / "slow.db", "--timeout-head", "1", "--timeout-body", "1")
    try:
        idle = socket.create_connection(("127.0.0.1", port))
        header = socket.create_connection(("127.0.0.1", port))
        header.sendall(HEADS[1])
        body = socket.create_connection(("127.0.0.1", port))
        body.sendall(HEADS[2])
        for s in (idle, header, body):
            s.settimeout(10)
        started = time.monotonic()
        for _ in range(3):  # a byte a half second keeps none of them alive
            time.sleep(0.5)
            for s in (header, body):
                with contextlib.suppress(OSError):  # closed already
                    s.sendall(b"a")
        assert closed_by_server(idle)
        assert closed_by_server(header)
        answer = body.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"did not arrive within 1 s" in answer
        assert time.monotonic() - started < 8
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        stop(proc)


def test_an_answer_the_client_does_not_read_is_cut_off(tmp_path: Path) -> None:
    proc, port = serve(tmp_path / "reader.db", "--timeout-body", "1")
    try:
        size = int(httpx.get(f"http://127.0.0.1:{port}/docs-assets/swagger-ui-bundle.js", timeout=10).headers["content-length"])
        reader = socket.socket()
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.connect(("127.0.0.1", port))
        # Twenty answers asked at once (pipelined), 30 MB: more than the sockets' buffers hold.
        reader.sendall(b"GET /docs-assets/swagger-ui-bundle.js HTTP/1.1\r\nHost: localhost\r\n\r\n" * 20)
        time.sleep(5)  # reads nothing: the buffers fill, the server waits to write, its deadline runs
        reader.settimeout(10)
        got = 0
        try:
            while chunk := reader.recv(65536):
                got += len(chunk)
        except ConnectionResetError:
            pass
        assert got < 20 * size  # the answers were cut, not waited on forever
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        stop(proc)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts the server's descriptors in /proc")
def test_connections_whose_client_stops_reading_are_dropped_not_left_to_drain(tmp_path: Path) -> None:
    """A connection closed for a deadline or the cap waited to send what it had left,
    which a client that never reads never lets happen: its descriptor and its answer
    stayed, past the cap, and a shutdown waited for the client to go."""
    proc, port = serve(tmp_path / "stall.db", "--max-connections", "4", "--timeout-body", "1", "--timeout-head", "1")
    socks: list[socket.socket] = []
    try:
        def descriptors() -> int:
            return len(os.listdir(f"/proc/{proc.pid}/fd"))

        before = descriptors()
        for _ in range(8):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /docs-assets/swagger-ui-bundle.js HTTP/1.1\r\nHost: localhost\r\n\r\n" * 8)
            socks.append(s)
            time.sleep(0.2)
        deadline = time.monotonic() + 20
        while descriptors() > before + 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert descriptors() <= before + 1  # every stalled connection gone, though its client still holds it
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        proc.terminate()
        proc.wait(10)  # no connection left for the shutdown to wait on
    finally:
        for s in socks:
            s.close()
        stop(proc)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads the server's CPU time from /proc")
def test_a_search_whose_client_gave_up_stops_working(tmp_path: Path) -> None:
    from memorist import Memory

    db = tmp_path / "cancel.db"
    with Memory(str(db), embedder="hashing") as memory:
        for i in range(5000):
            memory.add(f"note {i} about item {i}", user_id="u", infer=False)
    proc, port = serve(db)
    # 240 keys (an OR of one key's values is checked as one 'in', and cheap): within
    # the filter's budget over 5,000 memories, about a second of checks.
    costly = {"query": "item", "user_id": "u", "filters": {"OR": [{f"cat{i}": "x"} for i in range(240)]}}
    url = f"http://127.0.0.1:{port}/api/memories/search/"
    try:
        before = _cpu_seconds(proc.pid)
        assert httpx.post(url, json=costly, timeout=120).status_code == 200
        whole = _cpu_seconds(proc.pid) - before
        before = _cpu_seconds(proc.pid)
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url, json=costly, timeout=httpx.Timeout(5, read=whole / 10))
        time.sleep(whole * 2 + 1)  # long enough for the whole search, had it gone on
        abandoned = _cpu_seconds(proc.pid) - before
        assert abandoned < whole / 2, (abandoned, whole)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        stop(proc)
