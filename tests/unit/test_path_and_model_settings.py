"""A blank store path and a model folder that is not there are configuration errors
naming the setting, not the SQLite or loader error they used to end in."""

from __future__ import annotations

import pytest

from memorist import ConfigurationError, Memory


@pytest.mark.parametrize("path", ["", "   ", "\t"])
def test_a_blank_path_is_refused_naming_path(path: str) -> None:
    with pytest.raises(ConfigurationError, match="path must name a store"):
        Memory(path, embedder="hashing")


@pytest.mark.parametrize("folder", ["/nonexistent/model", "./no-such-model", "../no-such-model", "~/no-such-model-here"])
def test_a_model_folder_that_is_not_there_is_refused_naming_it(folder: str) -> None:
    with pytest.raises(ConfigurationError, match=f"no model folder at {folder}"):
        Memory(":memory:", embedder=f"sentence-transformers:{folder}")

