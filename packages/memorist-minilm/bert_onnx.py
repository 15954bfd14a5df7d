"""all-MiniLM-L6-v2 (a BERT encoder) as an ONNX graph, built from its safetensors
weights by this file alone: no torch, no transformers, no tracing, and not even the
``onnx`` or ``numpy`` packages: the weights' bytes go into the graph as they are, and
the graph is written with a small protobuf encoder (the fields of onnx.proto it uses
are listed with it). Building the wheel therefore needs nothing but Python.

The graph is the network transformers runs for ``BertModel`` (absolute positions,
post layer norm, exact erf GELU), in standard opset-17 operators, so any ONNX Runtime
from 1.15 on runs it and fuses it at load time (attention, GELU, skip + layer norm;
the weight transposes are constant-folded once per session):

    embeddings = LayerNorm((word[ids] + token_type[0]) + position[:S])
    each layer:  x = LayerNorm(x + Attention(x, mask));  x = LayerNorm(x + FFN(x))

Inputs ``input_ids`` and ``attention_mask`` (int64, [batch, sequence]); output
``last_hidden_state`` (float32, [batch, sequence, hidden]). Pooling (the mean over
the mask) and normalisation are left to the caller, as sentence-transformers does
them after the transformer. Token types are always 0 for one sentence.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

#: Bumped whenever the graph built from the same weights changes.
CONVERTER_VERSION = 1
OPSET = 17
IR_VERSION = 8  # opset 17's IR: ONNX Runtime 1.15+ loads it

FLOAT, INT64 = 1, 7  # TensorProto.DataType
_ELEMENT = {"F32": (FLOAT, 4), "I64": (INT64, 8)}


# -- safetensors -----------------------------------------------------------------------


class Tensor:
    """A tensor of a safetensors file: ONNX data type, shape, little-endian bytes."""

    def __init__(self, dtype: int, shape: list[int], data: bytes) -> None:
        self.dtype, self.shape, self.data = dtype, shape, data


def read_safetensors(path: str | Path) -> dict[str, Tensor]:
    """The tensors of a safetensors file."""
    return read_safetensors_bytes(Path(path).read_bytes())


def read_safetensors_bytes(data: bytes) -> dict[str, Tensor]:
    """The tensors of safetensors data: an 8-byte header length, a JSON header (name →
    dtype, shape, byte offsets), then the raw little-endian tensors."""
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _ELEMENT:
            raise ValueError(f"tensor {name} has dtype {info['dtype']}, not one of {sorted(_ELEMENT)}")
        dtype, size = _ELEMENT[info["dtype"]]
        start, end = info["data_offsets"]
        if end - start != size * math.prod(info["shape"]) or base + end > len(data):
            raise ValueError(f"tensor {name}: its byte range does not match its shape {info['shape']}")
        tensors[name] = Tensor(dtype, list(info["shape"]), data[base + start : base + end])
    return tensors


# -- protobuf, the fields of onnx.proto used here ----------------------------------------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64s as two's complement, ten bytes
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _float(field: int, value: float) -> bytes:
    return _varint(field << 3 | 5) + struct.pack("<f", value)


def tensor(name: str, dtype: int, shape: list[int], raw: bytes) -> bytes:
    """TensorProto: dims=1, data_type=2, name=8, raw_data=9."""
    return b"".join(_int(1, d) for d in shape) + _int(2, dtype) + _bytes(8, name) + _bytes(9, raw)


def attribute(name: str, value: Any) -> bytes:
    """AttributeProto: name=1, f=2, i=3, ints=8, type=20 (FLOAT=1, INT=2, INTS=7)."""
    if isinstance(value, float):
        return _bytes(1, name) + _float(2, value) + _int(20, 1)
    if isinstance(value, int):
        return _bytes(1, name) + _int(3, value) + _int(20, 2)
    return _bytes(1, name) + b"".join(_int(8, v) for v in value) + _int(20, 7)


def node(op: str, inputs: list[str], outputs: list[str], name: str, **attrs: Any) -> bytes:
    """NodeProto: input=1, output=2, name=3, op_type=4, attribute=5."""
    body = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in outputs)
    return body + _bytes(3, name) + _bytes(4, op) + b"".join(_bytes(5, attribute(k, v)) for k, v in attrs.items())


def value_info(name: str, dtype: int, dims: list[int | str]) -> bytes:
    """ValueInfoProto: name=1, type=2 → TypeProto.tensor_type=1 → elem_type=1,
    shape=2 → dim=1 → dim_value=1 | dim_param=2."""
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d)) for d in dims)
    return _bytes(1, name) + _bytes(2, _bytes(1, _int(1, dtype) + _bytes(2, shape)))


def model(nodes: list[bytes], initializers: list[bytes], inputs: list[bytes], outputs: list[bytes]) -> bytes:
    """ModelProto: ir_version=1, producer_name=2, producer_version=3, graph=7,
    opset_import=8 (domain=1, version=2); GraphProto: node=1, name=2, initializer=5,
    input=11, output=12."""
    graph = (
        b"".join(_bytes(1, n) for n in nodes)
        + _bytes(2, "bert_encoder")
        + b"".join(_bytes(5, t) for t in initializers)
        + b"".join(_bytes(11, i) for i in inputs)
        + b"".join(_bytes(12, o) for o in outputs)
    )
    return (
        _int(1, IR_VERSION)
        + _bytes(2, "memorist-minilm")
        + _bytes(3, str(CONVERTER_VERSION))
        + _bytes(7, graph)
        + _bytes(8, _bytes(1, "") + _int(2, OPSET))
    )


# -- the network ---------------------------------------------------------------------------


def build(weights: dict[str, Tensor], config: dict[str, Any]) -> bytes:
    """The serialized ONNX model of a BERT encoder, given its weights and config.json."""
    if config.get("model_type") != "bert" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("only BERT encoders with absolute positions are supported")
    if config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"only the exact GELU is supported, not {config.get('hidden_act')!r}")
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    if hidden % heads:
        raise ValueError(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))

    inits: list[bytes] = []
    nodes: list[bytes] = []

    def weight(name: str) -> str:
        t = weights.get(prefix + name)
        if t is None or t.dtype != FLOAT:
            raise ValueError(f"the weights lack the float32 tensor {prefix + name}")
        inits.append(tensor(name, FLOAT, t.shape, t.data))
        return name

    def ints(name: str, values: list[int]) -> str:
        inits.append(tensor(name, INT64, [len(values)], struct.pack(f"<{len(values)}q", *values)))
        return name

    def scalar(name: str, value: float) -> str:
        inits.append(tensor(name, FLOAT, [], struct.pack("<f", value)))
        return name

    def op(kind: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(node(kind, inputs, [output], output, **attrs))
        return output

    def linear(x: str, name: str, out: str) -> str:
        # torch's Linear keeps its weight as [out, in]; MatMul wants [in, out]. The
        # Transpose of a constant is folded by ONNX Runtime when the session loads.
        w = op("Transpose", [weight(f"{name}.weight")], f"{name}.weight.T", perm=[1, 0])
        return op("Add", [op("MatMul", [x, w], out + ".mm"), weight(f"{name}.bias")], out)

    def layer_norm(x: str, name: str, out: str) -> str:
        return op("LayerNormalization", [x, weight(f"{name}.weight"), weight(f"{name}.bias")], out, axis=-1, epsilon=eps)

    # Embeddings: (word + token_type 0) + position, in transformers' order.
    ints("zero", [0])
    ints("one", [1])
    type0 = op("Gather", [weight("embeddings.token_type_embeddings.weight"), ints("index0", [0])], "type0", axis=0)
    words = op("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "word_vectors", axis=0)
    length = op("Slice", [op("Shape", ["input_ids"], "ids_shape"), "one", ints("two", [2])], "seq_len")
    positions = op("Slice", [weight("embeddings.position_embeddings.weight"), "zero", length, "zero"], "positions")
    x = op("Add", [op("Add", [words, type0], "word_and_type"), positions], "embedding_sum")
    x = layer_norm(x, "embeddings.LayerNorm", "embedded")

    # The additive mask, [batch, 1, 1, sequence]: 0 on tokens, float32's minimum on padding.
    maskf = op("Cast", ["attention_mask"], "mask_float", to=FLOAT)
    inverted = op("Sub", [scalar("one_f", 1.0), maskf], "mask_inverted")
    additive = op("Mul", [inverted, scalar("float_min", -3.4028234663852886e38)], "mask_additive")
    additive = op("Unsqueeze", [additive, ints("axes_1_2", [1, 2])], "mask_4d")

    ints("split_heads", [0, 0, heads, head_dim])
    ints("merge_heads", [0, 0, hidden])
    scalar("scale", head_dim**-0.5)
    scalar("sqrt2", math.sqrt(2.0))
    scalar("half", 0.5)

    layers = int(config["num_hidden_layers"])
    for i in range(layers):
        p = f"encoder.layer.{i}."
        q = linear(x, p + "attention.self.query", f"l{i}.q")
        k = linear(x, p + "attention.self.key", f"l{i}.k")
        v = linear(x, p + "attention.self.value", f"l{i}.v")
        q = op("Transpose", [op("Reshape", [q, "split_heads"], f"l{i}.q4")], f"l{i}.qh", perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [k, "split_heads"], f"l{i}.k4")], f"l{i}.kh", perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [v, "split_heads"], f"l{i}.v4")], f"l{i}.vh", perm=[0, 2, 1, 3])
        scores = op("Mul", [op("MatMul", [q, k], f"l{i}.qk"), "scale"], f"l{i}.scores")
        probs = op("Softmax", [op("Add", [scores, additive], f"l{i}.masked")], f"l{i}.probs", axis=-1)
        context = op("Transpose", [op("MatMul", [probs, v], f"l{i}.ctx")], f"l{i}.ctx_t", perm=[0, 2, 1, 3])
        context = op("Reshape", [context, "merge_heads"], f"l{i}.context")
        attended = linear(context, p + "attention.output.dense", f"l{i}.attn_out")
        x = layer_norm(op("Add", [attended, x], f"l{i}.attn_res"), p + "attention.output.LayerNorm", f"l{i}.attn_ln")
        h = linear(x, p + "intermediate.dense", f"l{i}.inter")
        erf = op("Erf", [op("Div", [h, "sqrt2"], f"l{i}.gelu_div")], f"l{i}.gelu_erf")
        gelu = op("Mul", [h, op("Add", [erf, "one_f"], f"l{i}.gelu_add")], f"l{i}.gelu_mul")
        gelu = op("Mul", [gelu, "half"], f"l{i}.gelu")
        out = linear(gelu, p + "output.dense", f"l{i}.ffn_out")
        last = f"l{i}.out" if i < layers - 1 else "last_hidden_state"
        x = layer_norm(op("Add", [out, x], f"l{i}.ffn_res"), p + "output.LayerNorm", last)

    return model(
        nodes,
        inits,
        [value_info("input_ids", INT64, ["batch", "sequence"]), value_info("attention_mask", INT64, ["batch", "sequence"])],
        [value_info("last_hidden_state", FLOAT, ["batch", "sequence", hidden])],
    )


def convert(model_dir: str | Path, dest: str | Path) -> int:
    """Write ``model_dir``'s model.safetensors as the ONNX file ``dest``; its size."""
    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    data = build(read_safetensors(model_dir / "model.safetensors"), config)
    Path(dest).write_bytes(data)
    return len(data)
