"""How many initializers and nodes an ONNX model's graph holds, counted on the protobuf wire format before
onnx parses it: the parse of a 37 MB file of a million empty initializers takes a gigabyte (as safetensors'
header is counted before json.loads). Only the field keys and lengths are read; a layout this walk does not
follow (a group, a cut length) gives None and the parse decides."""

from __future__ import annotations

from ._protobuf_wire import fields

MODEL_GRAPH = 7  # onnx.proto: ModelProto.graph
GRAPH_NODE, GRAPH_INITIALIZER, GRAPH_SPARSE_INITIALIZER = 1, 5, 15  # GraphProto fields


def graph_counts(data: bytes | memoryview) -> tuple[int, int] | None:
    """(initializers, nodes) of the model's graph, or None where the bytes are not a protobuf this walk reads."""
    initializers = nodes = 0
    try:
        for number, _, start, end in fields(data, 0, len(data)):
            if number != MODEL_GRAPH:
                continue
            for inner, _, _, _ in fields(data, start, end):
                initializers += inner in (GRAPH_INITIALIZER, GRAPH_SPARSE_INITIALIZER)
                nodes += inner == GRAPH_NODE
    except ValueError:
        return None
    return initializers, nodes
