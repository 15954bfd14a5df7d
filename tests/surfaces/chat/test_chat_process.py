"""`memorist chat` as a real process: the design's smoke test (curl with a bearer key
and a conversation id, the answer carrying metadata.scratch.ace_delta), the memory
service reached at MEMORY_MANAGEMENT_URL, the page and its assets served locally."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import httpx
import pytest
from chat_helpers import free_port

pytestmark = pytest.mark.sqlite_only("memorist chat in a subprocess, on a file")


def memorist(db: str, *args: str, env: dict[str, str] | None = None, **kwargs):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "MEMORY_", "OPENAI_", "GEMINI_", "ACE_"))}
    return [sys.executable, "-m", "memorist", "--db", db, "--embedder", "hashing", *args], {**base, **(env or {})}


def test_the_chat_process_answers_the_smoke_test(tmp_path, memory_service):
    db = str(tmp_path / "chat.db")
    argv, env = memorist(db, "keys", "create", "--tenant", "school", "--user", "alice")
    key = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    port = free_port()
    argv, env = memorist(db, "chat", "--port", str(port), "--log-level", "warning",
                         env={"MEMORY_MANAGEMENT_URL": memory_service.url, "MEMORY_API_KEY": memory_service.key})
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "memorist chat did not start"
            time.sleep(0.1)
        reply = httpx.post(f"{base}/api/ai/chat", headers={"Authorization": f"Bearer {key}"}, timeout=30,
                           json={"message": "I keep messing up 1/2 + 1/3.", "conversationId": "session-1"})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["response"] == "1/2 + 1/3 = 5/6" and "ace_delta" in body["metadata"]["scratch"]
        assert memory_service.recorder.requests == []  # memory off: the memory service never heard of it
        remembered = httpx.post(f"{base}/api/ai/chat", headers={"Authorization": f"Bearer {key}"}, timeout=30,
                                json={"message": "I am vegetarian", "conversationId": "session-1", "memoryEnabled": True})
        assert remembered.json()["metadata"]["memory"]["status"] == "used"
        assert ("POST", "/api/memories/") in [(m, p) for m, p, _ in memory_service.recorder.requests]
        assert httpx.post(f"{base}/api/ai/chat", json={"message": "hi"}, timeout=30).status_code == 401

        page = httpx.get(f"{base}/", timeout=10).text
        assert "Long Term Memory" in page and "Project Long Term Memory" in page
        assets = re.findall(r'(?:src|href)="([^"]+)"', page)
        assert assets and all(not a.startswith(("http:", "https:", "//")) for a in assets)  # no CDN
        for asset in ("static/chat.js", "static/chat.css"):
            assert httpx.get(f"{base}/{asset}", timeout=10).status_code == 200
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_without_a_key_the_chat_refuses_to_listen_beyond_loopback(tmp_path):
    argv, env = memorist(str(tmp_path / "open.db"), "chat", "--host", "0.0.0.0", "--port", str(free_port()))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "holds no API key" in done.stderr
