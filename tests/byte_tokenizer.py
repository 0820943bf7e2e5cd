"""A small byte-level tokenizer for tests, shaped like nlm's: ids 0-255 are bytes, a few whole words above
them, the space pre-split as its own token (so " dog" encodes to [32, 256])."""

from __future__ import annotations

from pathlib import Path


class ByteWordTokenizer:
    kind = "test-bytes"
    unk_id = None
    special_ids: frozenset[int] = frozenset()
    notes: tuple[str, ...] = ()

    def __init__(self, words=("dog", "cat", "puppy", "house"), path: Path | str = "test-tokenizer"):
        self.path = Path(path)
        self.words = {w.encode(): 256 + n for n, w in enumerate(words)}
        self.strings = {i: w.decode() for w, i in self.words.items()}
        self.vocab_size = 256 + len(words)

    def encode(self, text: str) -> list[int]:
        ids = []
        for n, piece in enumerate(text.split(" ")):
            if n:
                ids.append(32)
            data = piece.encode()
            while data:
                # longest whole word at the front, else one byte
                match = max((w for w in self.words if data.startswith(w)), key=len, default=None)
                if match is None:
                    ids.append(data[0])
                    data = data[1:]
                else:
                    ids.append(self.words[match])
                    data = data[len(match):]
        return ids

    def token_bytes(self, token_id: int) -> bytes:
        if token_id < 256:
            return bytes([token_id])
        return self.strings[token_id].encode()

    def decode(self, ids) -> str:
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def token_string(self, token_id: int) -> str:
        return self.token_bytes(token_id).decode("utf-8", errors="replace")
