"""How many initializers and nodes an ONNX model's graph holds, counted on the protobuf wire format before
onnx parses it: the parse of a 37 MB file of a million empty initializers takes a gigabyte (as safetensors'
header is counted before json.loads). Only the field keys and lengths are read; a layout this walk does not
follow (a group, a cut length) gives None and the parse decides."""

from __future__ import annotations

from collections.abc import Iterator

MODEL_GRAPH = 7  # onnx.proto: ModelProto.graph
GRAPH_NODE, GRAPH_INITIALIZER, GRAPH_SPARSE_INITIALIZER = 1, 5, 15  # GraphProto fields


def _varint(data: bytes | memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a varint past the end")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: bytes | memoryview, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(field number, start, end of its bytes) of each field in data[start:end]."""
    at = start
    while at < end:
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, after = _varint(data, at)
        elif wire == 1:
            after = at + 8
        elif wire == 5:
            after = at + 4
        elif wire == 2:
            length, at = _varint(data, at)
            after = at + length
        else:  # groups: not in onnx.proto
            raise ValueError(f"wire type {wire}")
        if after > end:
            raise ValueError("a field past the end")
        yield number, at, after
        at = after


def graph_counts(data: bytes | memoryview) -> tuple[int, int] | None:
    """(initializers, nodes) of the model's graph, or None where the bytes are not a protobuf this walk reads."""
    initializers = nodes = 0
    try:
        for number, start, end in _fields(data, 0, len(data)):
            if number != MODEL_GRAPH:
                continue
            for inner, _, _ in _fields(data, start, end):
                initializers += inner in (GRAPH_INITIALIZER, GRAPH_SPARSE_INITIALIZER)
                nodes += inner == GRAPH_NODE
    except ValueError:
        return None
    return initializers, nodes
