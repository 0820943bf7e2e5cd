"""Zip members (torch.save's zip format, .npz) read one way: bounded while decompressing, never after.

zipfile inflates an LZMA or bzip2 member without an output limit before cutting it to the size its
entry declares, so a 300 KB member can take gigabytes; here every method is decompressed with a limit
on its output, and a stream that would inflate past its declared size is refused on the spot.
Stored members are found by offset so that they can be memory-mapped instead."""

from __future__ import annotations

import bz2
import lzma
import os
import struct
import zipfile
import zlib
from pathlib import Path
from typing import IO, BinaryIO, Protocol

from ..errors import CheckpointError

LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # the 30-byte local file header
LZMA_HEADER = struct.Struct("<BBH")  # the zip LZMA prefix: major and minor version, length of the properties
CHUNK = 1 << 16  # compressed bytes fed to a decompressor at a time
ENCRYPTED = 0x1  # general purpose flag bit 0


def is_stored(info: zipfile.ZipInfo) -> bool:
    return info.compress_type == zipfile.ZIP_STORED


def data_offset(fp: IO[bytes] | None, info: zipfile.ZipInfo, where: str = "") -> int:
    """Byte offset of the member's data; the local header's name and extra lengths can differ
    from the central directory's, so they are read from the local header itself."""
    if fp is None:
        raise CheckpointError(f"{where or 'zip'}: the archive is closed")
    fp.seek(info.header_offset)
    header = fp.read(LOCAL_HEADER.size)
    if len(header) != LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise CheckpointError(f"{where or 'zip'}: member {info.filename!r} has no valid local header")
    name_len, extra_len = LOCAL_HEADER.unpack(header)[-2:]
    return info.header_offset + LOCAL_HEADER.size + name_len + extra_len


class Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...


def lzma_decompressor(props: bytes, file_size: int) -> lzma.LZMADecompressor:
    """zipfile's LZMA: raw LZMA1 with its 5 property bytes. The dictionary the stream asks for is capped at
    the member's declared size (no valid back-reference reaches further), so no lie makes liblzma reserve GBs."""
    if len(props) != 5 or props[0] >= 9 * 5 * 5:
        raise CheckpointError("LZMA properties that no writer produces")
    lc, rest = props[0] % 9, props[0] // 9
    dict_size = min(int.from_bytes(props[1:5], "little"), max(file_size, 1 << 12))
    return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[
        {"id": lzma.FILTER_LZMA1, "dict_size": max(dict_size, 1 << 12), "lc": lc, "lp": rest % 5, "pb": rest // 5}])


def read_member(path: Path, info: zipfile.ZipInfo, where: str, limit: int | None = None) -> bytes:
    """The member's bytes, at most the size its entry declares, checked against its CRC.
    With `limit`, only the first `limit` bytes (a header), unchecked."""
    if info.flag_bits & ENCRYPTED:
        raise CheckpointError(f"{where}: the zip member is encrypted")
    whole = limit is None or limit >= info.file_size
    want = info.file_size if whole else max(limit or 0, 0)
    with open(path, "rb") as f:
        start = data_offset(f, info, where)
        if start + info.compress_size > os.fstat(f.fileno()).st_size:
            raise CheckpointError(f"{where}: the zip member's {info.compress_size} bytes run past the end of the file")
        f.seek(start)
        if is_stored(info):
            if info.compress_size != info.file_size:
                raise CheckpointError(f"{where}: a stored zip member of {info.compress_size} bytes declares "
                                      f"{info.file_size} bytes")
            data = f.read(want)
        else:
            # one byte past the declared size shows that the stream inflates further
            data = inflate(f, info, want + 1 if whole else want, where)
    if whole:
        if len(data) > info.file_size:
            raise CheckpointError(f"{where}: the zip member inflates past the {info.file_size} bytes its entry declares")
        if len(data) < info.file_size:
            raise CheckpointError(f"{where}: the zip member holds {len(data)} bytes, its entry declares {info.file_size}")
        if zlib.crc32(data) != info.CRC:
            raise CheckpointError(f"{where}: the zip member fails its CRC check")
    return data


def inflate(f: BinaryIO, info: zipfile.ZipInfo, cap: int, where: str) -> bytes:
    """At most `cap` bytes out of the member's compressed stream, which starts at f's position."""
    left = info.compress_size

    def take(n: int) -> bytes:
        nonlocal left
        data = f.read(min(n, left))
        left = left - len(data) if len(data) == min(n, left) else 0  # a file cut short ends the stream
        return data

    decompressor: Decompressor
    if info.compress_type == zipfile.ZIP_DEFLATED:
        decompressor = zlib.decompressobj(-15)
    elif info.compress_type == zipfile.ZIP_BZIP2:
        decompressor = bz2.BZ2Decompressor()
    elif info.compress_type == zipfile.ZIP_LZMA:
        head = take(LZMA_HEADER.size)
        if len(head) < LZMA_HEADER.size:
            raise CheckpointError(f"{where}: the LZMA zip member is cut short")
        try:
            decompressor = lzma_decompressor(take(LZMA_HEADER.unpack(head)[2]), info.file_size)
        except CheckpointError as err:
            raise CheckpointError(f"{where}: {err}") from None
    else:
        raise CheckpointError(f"{where}: the zip member uses compression method {info.compress_type}, "
                              "expected stored, deflate, bzip2 or LZMA")
    out = bytearray()
    pending = b""
    while len(out) < cap and not decompressor.eof:
        if not pending:
            pending = take(CHUNK)
        before = len(out)
        out += decompressor.decompress(pending, cap - len(out))
        # zlib hands back the input it did not use; lzma and bz2 keep it (and say whether they need more)
        pending = getattr(decompressor, "unconsumed_tail", b"")
        if len(out) == before and not pending and not left and getattr(decompressor, "needs_input", True):
            break  # the stream ended without its end marker: what came out is all there is
    return bytes(out)
