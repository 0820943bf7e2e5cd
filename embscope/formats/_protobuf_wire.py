"""The protobuf wire format, walked by hand where a reader needs a few fields of a message and no library (ONNX's
counts before onnx parses, TensorFlow's checkpoint index): field keys, varints and lengths, each checked against
the bytes it claims. A layout this walk does not follow (a group, a cut length) raises ValueError."""

from __future__ import annotations

from collections.abc import Iterator

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5  # the wire types proto3 writes


def varint(data: bytes | memoryview, at: int) -> tuple[int, int]:
    """The varint at `at`, and where the bytes after it start."""
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


def fields(data: bytes | memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, start, end of its bytes) of each field in data[start:end]."""
    at = start
    while at < end:
        key, at = varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            _, after = varint(data, at)
        elif wire == FIXED64:
            after = at + 8
        elif wire == FIXED32:
            after = at + 4
        elif wire == LENGTH:
            length, at = varint(data, at)
            after = at + length
        else:  # groups: in no message read here
            raise ValueError(f"wire type {wire}")
        if after > end:
            raise ValueError("a field past the end")
        yield number, wire, at, after
        at = after
