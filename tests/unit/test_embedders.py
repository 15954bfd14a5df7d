"""Embedders: the hashing embedder, the base class's checks, and resolve_embedder."""

from __future__ import annotations

import numpy as np
import pytest

from memorist import ConfigurationError, Embedder, HashingEmbedder, ProviderError
from memorist.embed import embedder_for_identity, resolve_embedder

TEXTS = ["Is vegetarian", "Allergic to nuts", "Lives in Berlin", "", "Prefers dark mode in every editor"]


def test_hashing_is_deterministic_across_instances():
    a = HashingEmbedder().embed(TEXTS)
    b = HashingEmbedder().embed(TEXTS)
    assert np.array_equal(a, b)


def test_hashing_identity_and_shape():
    e = HashingEmbedder()
    assert (e.name, e.dim) == ("hashing-v1-384", 384)
    out = e.embed(TEXTS)
    assert out.shape == (len(TEXTS), 384)
    assert out.dtype == np.float32
    e256 = HashingEmbedder(256)
    assert (e256.name, e256.dim) == ("hashing-v1-256", 256)
    assert e256.embed(["x"]).shape == (1, 256)


def test_rows_are_unit_norm_and_empty_text_is_zero_not_nan():
    out = HashingEmbedder().embed(TEXTS)
    norms = np.linalg.norm(out, axis=1)
    for text, norm in zip(TEXTS, norms, strict=True):
        assert norm == pytest.approx(0.0 if text == "" else 1.0, abs=1e-5)
    assert np.isfinite(out).all()


def test_batching_matches_one_by_one():
    e = HashingEmbedder(64)
    e.batch_size = 2  # force several _embed calls
    texts = [f"memory number {i} about topic {i % 3}" for i in range(7)]
    batched = e.embed(texts)
    single = np.stack([e.embed_one(t) for t in texts])
    assert np.allclose(batched, single, atol=1e-6)
    assert np.allclose(batched, HashingEmbedder(64).embed(texts), atol=1e-6)


def test_empty_input_gives_empty_matrix():
    out = HashingEmbedder(32).embed([])
    assert out.shape == (0, 32)


def test_lexical_overlap_is_more_similar():
    e = HashingEmbedder()
    q, near, far = e.embed(["likes sushi", "really likes sushi a lot", "drives a blue car"])
    assert float(q @ near) > float(q @ far)


def test_dim_below_16_is_refused():
    with pytest.raises(ValueError):
        HashingEmbedder(8)


@pytest.mark.parametrize(
    "spec, name, dim",
    [("hashing", "hashing-v1-384", 384), ("hashing:256", "hashing-v1-256", 256), (" Hashing:64 ", "hashing-v1-64", 64)],
)
def test_resolve_hashing_strings(spec, name, dim):
    e = resolve_embedder(spec)
    assert isinstance(e, HashingEmbedder)
    assert (e.name, e.dim) == (name, dim)


def test_resolve_passes_instances_through():
    e = HashingEmbedder(32)
    assert resolve_embedder(e) is e


@pytest.mark.parametrize("spec", ["hashing:abc", "hashing:8", "nope", "openai-ish:model", "", "   ", 5, 3.5, ["hashing"]])
def test_bad_specs_raise_configuration_error(spec):
    with pytest.raises(ConfigurationError) as info:
        resolve_embedder(spec)
    assert str(info.value)


def test_hashing_dim_has_an_upper_bound():
    # One add at 10,000,000 dimensions took 8 s and 2.7 GB: the largest is 8,192.
    assert HashingEmbedder(8192).dim == 8192
    assert resolve_embedder("hashing:8192").dim == 8192
    with pytest.raises(ValueError):
        HashingEmbedder(8193)
    for spec in ("hashing:8193", "hashing:10000000"):
        with pytest.raises(ConfigurationError, match=r"embedder 'hashing:<dim>'.*16 to 8192"):
            resolve_embedder(spec)


def test_a_too_large_hashing_dim_is_refused_by_memory():
    from memorist import Memory

    with pytest.raises(ConfigurationError, match="embedder"):
        Memory(":memory:", embedder="hashing:10000000")


def test_bad_hashing_dim_message_names_the_form():
    with pytest.raises(ConfigurationError, match="hashing:<dim>"):
        resolve_embedder("hashing:abc")


def test_embedder_for_identity_rebuilds_hashing():
    e = embedder_for_identity("hashing-v1-256")
    assert isinstance(e, HashingEmbedder) and e.dim == 256
    assert embedder_for_identity("hashing-v1-xyz") is None
    assert embedder_for_identity("some-other/model") is None


class WrongShape(Embedder):
    name = "wrong-shape"
    dim = 4

    def _embed(self, texts):
        return np.ones((len(texts), 3), dtype=np.float32)


class WrongCount(Embedder):
    name = "wrong-count"
    dim = 4

    def _embed(self, texts):
        return np.ones((len(texts) + 1, 4), dtype=np.float32)


class Boom(Embedder):
    name = "boom"
    dim = 4

    def _embed(self, texts):
        raise RuntimeError("service unavailable")


@pytest.mark.parametrize("cls", [WrongShape, WrongCount])
def test_wrong_shape_is_a_provider_error(cls):
    with pytest.raises(ProviderError, match=cls.name):
        cls().embed(["a", "b"])


def test_provider_exception_is_wrapped_with_cause():
    with pytest.raises(ProviderError, match="service unavailable") as info:
        Boom().embed(["a"])
    assert isinstance(info.value.__cause__, RuntimeError)


def test_custom_embedder_output_is_normalised():
    class Scaled(Embedder):
        name = "scaled"
        dim = 2

        def _embed(self, texts):
            return np.array([[3.0, 4.0]] * len(texts))

    out = Scaled().embed(["a"])
    assert out.dtype == np.float32
    assert np.allclose(out, [[0.6, 0.8]])
