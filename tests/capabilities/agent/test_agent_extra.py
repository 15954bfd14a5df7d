"""Without LangGraph, memorist still imports and works; asking for the agent says
which extra to install."""

from __future__ import annotations

import subprocess
import sys

BLOCK = "import sys; sys.modules['langgraph'] = None; sys.modules['langgraph.graph'] = None; "


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, timeout=120)


def test_memorist_imports_without_langgraph_and_says_what_to_install(tmp_path):
    done = python("import memorist, memorist.agent, memorist.agent.calculator as c; print(c.calculate('1/2+1/3').text)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5/6"
    asked = python("import memorist.agent as a\ntry:\n    a.Tutor\nexcept Exception as e:\n    print(type(e).__name__, e)")
    assert "ConfigurationError" in asked.stdout and "pip install 'memorist[agent]'" in asked.stdout
    store = python("import memorist.integrations.langgraph")
    assert store.returncode == 1 and "pip install 'memorist[agent]'" in store.stderr
    cli = python(
        "from memorist.cli import main\n"
        f"main(['--db', {str(tmp_path / 'x.db')!r}, '--embedder', 'hashing', 'run-turn', '--input', '-'])"
    )
    # The missing extra is reported before anything is read or written.
    assert cli.returncode == 1 and "pip install 'memorist[agent]'" in cli.stderr, cli.stderr
    assert not (tmp_path / "x.db").exists()
    demo = python("from memorist.cli import main\nmain(['--embedder', 'hashing', 'demo', '--agent'])")
    assert demo.returncode == 1 and "pip install 'memorist[agent]'" in demo.stderr, demo.stderr
