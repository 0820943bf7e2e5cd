"""Zip members (torch.save's zip format, .npz) read one way: bounded while decompressing, never after.

zipfile inflates an LZMA or bzip2 member without an output limit before cutting it to the size its
entry declares, so a 300 KB member can take gigabytes; here every method is decompressed with a limit
on its output, and a stream that would inflate past its declared size is refused on the spot.
Stored members are found by offset so that they can be memory-mapped instead."""

from __future__ import annotations

import bz2
import io
import lzma
import os
import struct
import zipfile
import zlib
from pathlib import Path
from typing import IO, Any, Protocol

from ..core import files
from ..core.errors import CheckpointError
from ..core.memory import size_text
from ..core.text import detail, quote
from ..storage.base import DAMAGE
from ..storage.constants import ZIP_MAGIC

LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # the 30-byte local file header
LZMA_HEADER = struct.Struct("<BBH")  # the zip LZMA prefix: major and minor version, length of the properties
CHUNK = 1 << 16  # compressed bytes fed to a decompressor at a time
MAX_READ = 1 << 24  # the most one read inflates at once
ENCRYPTED = 0x1  # general purpose flag bit 0
END_RECORD = struct.Struct("<4s4H2IH")  # the end of central directory record: field 5 is the directory's size
END_RECORD_64 = struct.Struct("<4sQ2H2I4Q")  # zip64's, just before its 20-byte locator: field 8 is the size
LOCATOR_64 = 20
# the central directory zipfile reads whole, an object made of each entry (200,000 entries, 11 MB of it, took 5.7 s
# and 150 MB; a million, a 50 MB file, would take half a minute): bounded before zipfile is asked. A torch.save zip
# holds an entry per storage (a 70B model's shard some hundreds), an .npz one per array: 8 MiB is about 100,000
MAX_CENTRAL_DIRECTORY = 8 << 20


def central_directory_size(tail: bytes) -> int | None:
    """The size of the central directory as the end records at the end of the file declare it, read as zipfile reads
    them (the last end record, then a zip64 record just before its locator, which wins); None where there is none."""
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + END_RECORD.size > len(tail):
        return None
    size: int = END_RECORD.unpack_from(tail, at)[5]
    record = at - LOCATOR_64 - END_RECORD_64.size
    if record >= 0 and tail[at - LOCATOR_64:at - LOCATOR_64 + 4] == b"PK\x06\x07" and \
            tail[record:record + 4] == b"PK\x06\x06":
        size = END_RECORD_64.unpack_from(tail, record)[8]
    return size


def check_central_directory(archive: IO[bytes], what: str, cap: int = MAX_CENTRAL_DIRECTORY,
                            needs: str = "any checkpoint") -> None:
    """Refuse a central directory past `cap` before zipfile reads it (`what`: the archive, as a message names it)."""
    end = os.fstat(archive.fileno()).st_size
    want = min(end, END_RECORD.size + 0xFFFF + LOCATOR_64 + END_RECORD_64.size)  # the records, a comment's most
    archive.seek(end - want)
    size = central_directory_size(archive.read(want))
    archive.seek(0)
    if size is not None and size > cap:
        raise CheckpointError(f"{what}'s central directory declares {size_text(size)}, more than the "
                              f"{size_text(cap)} {needs} needs; refused")


def opened_zip(archive: IO[bytes], what: str) -> zipfile.ZipFile:
    """zipfile's view of an archive whose central directory is within MAX_CENTRAL_DIRECTORY (check_central_directory)."""
    check_central_directory(archive, what)
    return zipfile.ZipFile(archive)


def open_zip(path: Path, what: str, cap: int = MAX_CENTRAL_DIRECTORY,
             needs: str = "any checkpoint") -> tuple[IO[bytes], zipfile.ZipFile]:
    """The zip at `path` as core.files opens it, and zipfile's view of it once its central directory is within `cap`;
    an archive zipfile cannot read is one line naming it (`what`: "torch.save zip", ...). The caller closes both."""
    where = quote(path)
    archive = files.open_file(path, "a checkpoint file")
    try:
        check_central_directory(archive, f"{where}: the {what}", cap, needs)
        return archive, zipfile.ZipFile(archive)
    except DAMAGE as err:
        archive.close()
        raise CheckpointError(f"{where}: expected a readable {what} archive ({detail(err)})") from None
    except BaseException:
        archive.close()
        raise


def is_stored(info: zipfile.ZipInfo) -> bool:
    return info.compress_type == zipfile.ZIP_STORED


def data_offset(fp: IO[bytes] | None, info: zipfile.ZipInfo, where: str = "") -> int:
    """Byte offset of the member's data; the local header's name and extra lengths can differ
    from the central directory's, so they are read from the local header itself."""
    if fp is None:
        raise CheckpointError(f"{where or 'zip'}: the archive is closed")
    fp.seek(info.header_offset)
    header = fp.read(LOCAL_HEADER.size)
    if len(header) != LOCAL_HEADER.size or header[:4] != ZIP_MAGIC:
        raise CheckpointError(f"{where or 'zip'}: member {info.filename!r} has no valid local header")
    name_len: int
    extra_len: int
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


class MemberReader(io.RawIOBase):
    """One zip member as a stream, inflated as it is read and never past the size its entry declares:
    a pickle read from it inflates only as far as the pickle goes."""

    def __init__(self, path: Path, info: zipfile.ZipInfo, where: str):
        super().__init__()
        if info.flag_bits & ENCRYPTED:
            raise CheckpointError(f"{where}: the zip member is encrypted")
        if is_stored(info) and info.compress_size != info.file_size:
            raise CheckpointError(f"{where}: a stored zip member of {info.compress_size} bytes declares "
                                  f"{info.file_size} bytes")
        self.info, self.where = info, where
        self.file = files.open_file(path, "a checkpoint file")  # closed with the reader
        try:
            start = data_offset(self.file, info, where)
            if start + info.compress_size > os.fstat(self.file.fileno()).st_size:
                raise CheckpointError(f"{where}: the zip member's {info.compress_size} bytes run past the end "
                                      "of the file")
            self.file.seek(start)
            self.left_in = info.compress_size
            self.decompressor = None if is_stored(info) else self.make_decompressor()
        except BaseException:
            self.file.close()
            raise
        self.pending = b""  # input zlib handed back unused
        self.delivered, self.crc = 0, 0

    def take(self, n: int) -> bytes:
        data = self.file.read(min(n, self.left_in))
        self.left_in = self.left_in - len(data) if len(data) == min(n, self.left_in) else 0  # a file cut short
        return data

    def make_decompressor(self) -> Decompressor:
        method = self.info.compress_type
        if method == zipfile.ZIP_DEFLATED:
            return zlib.decompressobj(-15)
        if method == zipfile.ZIP_BZIP2:
            return bz2.BZ2Decompressor()
        if method == zipfile.ZIP_LZMA:
            head = self.take(LZMA_HEADER.size)
            if len(head) < LZMA_HEADER.size:
                raise CheckpointError(f"{self.where}: the LZMA zip member is cut short")
            try:
                return lzma_decompressor(self.take(LZMA_HEADER.unpack(head)[2]), self.info.file_size)
            except CheckpointError as err:
                raise CheckpointError(f"{self.where}: {err}") from None
        raise CheckpointError(f"{self.where}: the zip member uses compression method {method}, "
                              "expected stored, deflate, bzip2 or LZMA")

    def produce(self, want: int) -> bytes:
        """Up to `want` more bytes of the member's content."""
        if self.decompressor is None:
            return self.take(want)
        out = bytearray()
        while len(out) < want and not self.decompressor.eof:
            if not self.pending and getattr(self.decompressor, "needs_input", True):
                self.pending = self.take(CHUNK)
            before = len(out)
            out += self.decompressor.decompress(self.pending, want - len(out))
            # zlib hands back the input it did not use; lzma and bz2 keep it, and say whether they need more
            self.pending = getattr(self.decompressor, "unconsumed_tail", b"")
            if len(out) == before and not self.pending and not self.left_in:
                break  # the stream ended (without its end marker): what came out is all there is
        return bytes(out)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.produce(min(len(buffer), self.info.file_size - self.delivered, MAX_READ))
        buffer[:len(data)] = data
        self.delivered += len(data)
        self.crc = zlib.crc32(data, self.crc)
        return len(data)

    def check_whole(self) -> None:
        """After the declared bytes were read: all were there, no more follow, and the CRC agrees."""
        if self.delivered < self.info.file_size:
            raise CheckpointError(f"{self.where}: the zip member holds {self.delivered} bytes, its entry declares "
                                  f"{self.info.file_size}")
        if self.produce(1):
            raise CheckpointError(f"{self.where}: the zip member inflates past the {self.info.file_size} bytes "
                                  "its entry declares")
        if self.crc != self.info.CRC:
            raise CheckpointError(f"{self.where}: the zip member fails its CRC check")

    def close(self) -> None:
        self.file.close()
        super().close()


def read_member(path: Path, info: zipfile.ZipInfo, where: str, limit: int | None = None) -> bytes:
    """The member's bytes, at most the size its entry declares, checked against its CRC.
    With `limit`, only the first `limit` bytes (a header), unchecked."""
    want = info.file_size if limit is None else min(limit, info.file_size)
    out = bytearray()
    with MemberReader(path, info, where) as reader:
        while len(out) < want:
            piece = reader.read(want - len(out))
            if not piece:
                break
            out += piece
        if limit is None or limit >= info.file_size:
            reader.check_whole()
    return bytes(out)
