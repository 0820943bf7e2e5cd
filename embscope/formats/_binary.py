"""Reading little-endian header fields from a buffer, where running past the end is a clear error
(the data they describe is mapped by _checks.map_array; whole files by files.map_file)."""

from __future__ import annotations

import struct
from typing import Any

from ..core import files
from ..core.errors import CheckpointError
from ..core.text import quote

map_file = files.map_file  # the readers of header fields map their files with it


class Cursor:
    """A position in a buffer (bytes or a memory map); every read is checked against its length first."""

    def __init__(self, buf: Any, where: str, pos: int = 0):
        self.buf, self.where, self.pos, self.size = buf, where, pos, len(buf)

    def take(self, n: int, what: str) -> int:
        """The position of the next n bytes, which must be there."""
        if n < 0 or self.pos + n > self.size:
            raise CheckpointError(f"{self.where}: expected {n} bytes for {what} at offset {self.pos}, "
                                  f"the file holds {self.size} bytes")
        start, self.pos = self.pos, self.pos + n
        return start

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack_from(fmt, self.buf, self.take(struct.calcsize(fmt), what))[0]

    def read(self, n: int, what: str) -> bytes:
        start = self.take(n, what)
        return bytes(self.buf[start:start + n])

    def left(self) -> int:
        return self.size - self.pos

    def text(self, raw: bytes, what: str) -> str:
        """`raw` as UTF-8 text; anything else is named in the error, cut short."""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(f"{self.where}: expected UTF-8 text for {what}, found "
                                  f"{quote(raw[:60].decode('utf-8', 'backslashreplace'))}") from None
