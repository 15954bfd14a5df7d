"""The int8 kernels of a large scope's exact search: SimSIMD in the default install,
NumKong with the ``ann`` extra. Whichever is there, a large exact search ranks by it
and answers as the float32 product does; a kernel that does not work in the process
(usearch 2.25 imported first carries SimSIMD's symbols, and SimSIMD's module then
refuses int8 arrays) is not used, and searches stay right.

Each case runs in a fresh interpreter: which kernel loads depends on what the process
imported before.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from memorist.store import vector_index

# A space of 3,000 clustered vectors, the coarse pass from 2,000 rows on, searched
# exactly (no graph): the best 50 must be the float32 product's, with its scores.
SEARCH = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from memorist.store import vector_index
    from memorist.store.vector_index import Row, SpaceIndex

    vector_index._COARSE_ROWS = 2000
    rng = np.random.default_rng(4)
    centres = rng.normal(size=(30, 48))
    x = centres[rng.integers(0, 30, 3000)] + 0.6 * rng.normal(size=(3000, 48))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    idx = SpaceIndex(48, 0, ann_threshold=0)
    idx.upsert([Row(f"m{i}", "", float(i), None, vector=v, created_at=float(i)) for i, v in enumerate(x)])
    dots = vector_index._int8_dots()
    same = True
    for seed in range(20):
        q = x[seed * 7] + 0.3 * np.random.default_rng(seed).normal(size=48).astype(np.float32)
        q /= np.linalg.norm(q)
        got = idx.search(q, k=50)
        scores = x @ q
        want = np.argsort(-scores, kind="stable")[:50]
        same &= {m for m, _ in got} == {f"m{i}" for i in want}
        same &= bool(np.allclose(sorted(s for _, s in got), sorted(scores[want]), atol=1e-6))
    loaded = [n for n in vector_index._INT8_KERNELS if sys.modules.get(n) is not None]
    kernel = next((n for n in loaded if dots is not None and sys.modules[n].cdist is dots.args[0]), None)
    print(json.dumps({"kernel": kernel, "coarse": idx._codes is not None, "same": bool(same)}))
    """
)


def run(prelude: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", prelude + SEARCH], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]) | {"stderr": proc.stderr}


def test_the_default_install_ranks_large_scopes_by_simsimd() -> None:
    got = run("import sys; sys.modules['numkong'] = None; sys.modules['usearch'] = None\n")
    assert got["kernel"] == "simsimd" and got["coarse"] and got["same"], got


@pytest.mark.skipif(importlib.util.find_spec("numkong") is None, reason="the ann extra (NumKong) is not installed")
def test_numkong_is_taken_first_when_the_ann_extra_is_installed() -> None:
    got = run("")
    assert got["kernel"] == "numkong" and got["coarse"] and got["same"], got


@pytest.mark.skipif(importlib.util.find_spec("usearch") is None, reason="the ann extra (usearch) is not installed")
def test_usearch_imported_before_simsimd_leaves_searches_right() -> None:
    got = run("import sys; import usearch.index; sys.modules['numkong'] = None\n")
    assert got["same"], got
    if got["kernel"] is None:  # refused by its check: named once, searched in float32
        assert "simsimd's int8 kernel does not work in this process" in got["stderr"]
        assert not got["coarse"]


def test_a_kernel_that_fails_its_check_is_not_used(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    class Broken:
        @staticmethod
        def cdist(*args, **kwargs):
            raise TypeError("Input tensors must have matching datatypes")

    class Wrong:
        @staticmethod
        def cdist(a, b, **kwargs):
            return (b.astype("float32") @ a[0].astype("float32"))[None, :] + 1

    modules = {"numkong": Broken, "simsimd": Wrong}
    monkeypatch.setattr(vector_index.importlib, "import_module", lambda name: modules[name])
    vector_index._int8_dots.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="memorist.store.vector_index"):
            assert vector_index._int8_dots() is None
        assert [r.getMessage().split("'")[0] for r in caplog.records] == ["numkong", "simsimd"]
    finally:
        vector_index._int8_dots.cache_clear()


def test_a_kernel_module_without_cdist_is_passed_over(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    class Foreign:  # a module of that name that is not the kernel library
        pass

    def load(name: str):
        if name == "numkong":
            raise RuntimeError("built for another CPU")
        return Foreign

    monkeypatch.setattr(vector_index.importlib, "import_module", load)
    vector_index._int8_dots.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="memorist.store.vector_index"):
            assert vector_index._int8_dots() is None
        assert "numkong cannot be used for int8 products (RuntimeError: built for another CPU)" in caplog.text
        assert "simsimd cannot be used for int8 products (AttributeError" in caplog.text
    finally:
        vector_index._int8_dots.cache_clear()
