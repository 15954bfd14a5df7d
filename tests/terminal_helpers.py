"""Running a command with its stderr on a terminal (a pty), as a user sees its bars:
importable from any test folder, as this file sits beside the root conftest.py."""

from __future__ import annotations

import os
import pty
import re
import subprocess


def run_in_terminal(argv: list[str], *, timeout: float = 120) -> tuple[list[str], str, int]:
    """Run ``argv`` with stderr on a pty 120 columns wide: the frames drawn on it (the
    lines between carriage returns and newlines, colour and cursor codes removed), its
    stdout, and its exit code."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, env={**os.environ, "COLUMNS": "120"})
    os.close(slave)
    drawn = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        drawn += chunk
    out = proc.communicate(timeout=timeout)[0].decode()
    os.close(master)
    plain = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", drawn).decode(errors="replace")
    return [f for f in re.split(r"[\r\n]", plain) if f.strip()], out, proc.returncode
