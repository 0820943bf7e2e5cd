"""GPT-2's byte alphabet: each of the 256 bytes shown as one printable character,
so that byte-level vocabularies can be stored as JSON text (a space is "Ġ")."""

from __future__ import annotations

import functools
import re


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: printable bytes stand for themselves, the others for chars from U+0100 up."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {byte: chr(byte) for byte in printable}
    shifted = 0
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + shifted)
            shifted += 1
    return table


@functools.cache
def unicode_to_byte() -> dict[str, int]:
    return {char: byte for byte, char in bytes_to_unicode().items()}


@functools.cache
def _latin1_of_alphabet() -> tuple[dict[int, int], re.Pattern[str]]:
    """str.translate's table from each alphabet char to the code point of its byte, and a pattern that
    finds a char outside the alphabet."""
    table = {ord(char): byte for byte, char in bytes_to_unicode().items()}
    outside = re.compile("[^" + "".join(re.escape(char) for char in bytes_to_unicode().values()) + "]")
    return table, outside


def byte_level_bytes(token: str) -> bytes:
    """The bytes a byte-level vocabulary entry stands for ("Ġdog" -> b" dog"); a char outside the
    alphabet (a vocabulary that is not byte-level) stands for its own UTF-8."""
    table, outside = _latin1_of_alphabet()
    if outside.search(token) is None:
        return token.translate(table).encode("latin-1")  # every char is now one code point below 256
    to_byte = unicode_to_byte()
    return b"".join(bytes([to_byte[char]]) if char in to_byte else char.encode("utf-8") for char in token)
