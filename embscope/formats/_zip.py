"""Where a member's bytes start inside a zip file, so a stored member can be memory-mapped."""

from __future__ import annotations

import struct
import zipfile
import zlib

from ..errors import CheckpointError

LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # the 30-byte local file header
# what opening or reading a damaged zip raises: bad CRC or header, broken deflate stream, bad offsets,
# an unknown compression method or zip version, encryption
ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, OSError, ValueError)


def data_offset(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """Byte offset of the member's data; the local header's name and extra lengths can differ
    from the central directory's, so they are read from the local header itself."""
    fp = zf.fp
    fp.seek(info.header_offset)
    header = fp.read(LOCAL_HEADER.size)
    if len(header) != LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise CheckpointError(f"zip member {info.filename!r} has no valid local header")
    name_len, extra_len = LOCAL_HEADER.unpack(header)[-2:]
    return info.header_offset + LOCAL_HEADER.size + name_len + extra_len


def is_stored(info: zipfile.ZipInfo) -> bool:
    return info.compress_type == zipfile.ZIP_STORED
