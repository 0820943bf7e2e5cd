"""Whether a file is of each tokenizer kind (tokenizers.kinds lists them, one sniff each), and what a sniff and its
kind's loader both read: apart from the loaders, so that finding a tokenizer imports the loader of the one kind
found and no other. Every sniff is handed a Probe (registry), is cheap, and never raises."""

from __future__ import annotations

import fnmatch
import itertools
import re
from pathlib import Path
from typing import Any

from embscope.core import files
from embscope.core.errors import CheckpointError, TokenizerError
from embscope.registry import Probe
from embscope.tokenizers.base import is_id, read_json, shown, sniff_json

# --- huggingface: tokenizer.json ----------------------------------------------------------------------------------

HUGGINGFACE_FILE = "tokenizer.json"


def huggingface(probe: Probe) -> bool:
    if probe.path.name == HUGGINGFACE_FILE:
        return True
    doc = sniff_json(probe.path)
    return isinstance(doc, dict) and isinstance(doc.get("model"), dict) and "vocab" in doc["model"]


# --- gpt2-bpe: vocab.json with merges.txt -------------------------------------------------------------------------


def vocab_and_merges_paths(path: Path) -> tuple[Path, Path] | None:
    """The (vocab.json, merges.txt) pair that ``path`` is one half of, if any."""
    name = path.name
    if name.endswith("merges.txt"):
        return path.with_name(name[: -len("merges.txt")] + "vocab.json"), path
    if name.endswith("vocab.json"):
        return path, path.with_name(name[: -len("vocab.json")] + "merges.txt")
    return None


def is_vocab(doc: object, entries: int | None = None) -> bool:
    """A non-empty JSON object of token ids; ``entries`` checks only the first few (enough to sniff)."""
    if not (isinstance(doc, dict) and doc):
        return False
    ids = list(itertools.islice(doc.values(), entries))
    return all(type(id) is int for id in ids) and min(ids) >= 0  # type(): JSON's true is not an id


def gpt2_bpe(probe: Probe) -> bool:
    paths = vocab_and_merges_paths(probe.path)
    if paths is None or not (paths[0].is_file() and paths[1].is_file()):
        return False
    return is_vocab(sniff_json(paths[0]), entries=100)


# --- wordpiece: BERT's vocab.txt ----------------------------------------------------------------------------------

DEFAULT_UNK = "[UNK]"
# how much sniffing reads to find the unknown token (BERT's is on line 101, after [unused0..98])
WORDPIECE_SNIFF_BYTES = 64 * 1024


def settings_files(path: Path) -> list[Path]:
    return [path.with_name("tokenizer_config.json"), path.with_name("config.json")]


def setting(path: Path, key: str) -> tuple[Any, str] | None:
    """A setting from tokenizer_config.json, else config.json, beside the vocabulary: (value, file name)."""
    for settings in settings_files(path):
        if settings.is_file():
            doc = read_json(settings)
            if isinstance(doc, dict) and key in doc:
                return doc[key], settings.name
    return None


def unk_token(path: Path) -> str:
    found = setting(path, "unk_token")
    if found is None:
        return DEFAULT_UNK
    value, source = found
    if isinstance(value, dict):  # {"content": "[UNK]", ...}, as transformers writes an AddedToken
        value = value.get("content")
    if not isinstance(value, str) or not value:
        raise TokenizerError(f"expected unk_token in {source} to be a token, found {shown(value)}")
    return value


def wordpiece(probe: Probe) -> bool:
    """A text file named *vocab.txt with a line that is the unknown token: a WordPiece model needs one."""
    path = probe.path
    if not path.name.endswith("vocab.txt"):
        return False
    found = files.peek(path, WORDPIECE_SNIFF_BYTES)
    if found is None:
        return False
    head = found.decode("utf-8", errors="replace").splitlines()
    try:
        unk = unk_token(path)
    except CheckpointError:
        return False
    return unk in head


# --- fairseq-dict: dict.txt ---------------------------------------------------------------------------------------

OVERWRITE = "#fairseq:overwrite"
FAIRSEQ_FILES = ("dict.txt", "dict.*.txt")  # fairseq-preprocess writes dict.<lang>.txt; released models ship dict.txt
FAIRSEQ_SNIFF_BYTES = 4096


def parse_line(line: str, number: int, path: Path) -> tuple[str, bool]:
    """(symbol, overwrite) of one `symbol count [#fairseq:overwrite]` line, as Dictionary.add_from_file splits it."""
    try:
        symbol, field = line.rstrip().rsplit(" ", 1)
        overwrite = field == OVERWRITE
        if overwrite:
            symbol, field = symbol.rsplit(" ", 1)
        int(field)
    except ValueError:
        raise TokenizerError(f"expected '<symbol> <count> [flags]' on line {number} of {path.name}, found "
                             f"{shown(line)}") from None
    return symbol, overwrite


def fairseq_dict(probe: Probe) -> bool:
    """A text file named as fairseq names its dictionaries, whose first lines are all `symbol count`."""
    if not any(fnmatch.fnmatch(probe.path.name, pattern) for pattern in FAIRSEQ_FILES):
        return False
    found = files.peek(probe.path, FAIRSEQ_SNIFF_BYTES)
    if not found:
        return False
    lines = found.decode("utf-8", errors="replace").split("\n")
    lines = lines[:-1] if len(found) == FAIRSEQ_SNIFF_BYTES or not lines[-1] else lines  # a cut or empty last line
    try:
        return bool(lines) and all(parse_line(line, n, probe.path) for n, line in enumerate(lines, 1))
    except TokenizerError:
        return False


# --- sentencepiece: a *.model protobuf ----------------------------------------------------------------------------


def sentencepiece(probe: Probe) -> bool:
    """A protobuf ModelProto: field 1 (pieces, length-delimited) whose own field 1 is the piece text."""
    head = probe.head[:16]
    if len(head) < 4 or head[0] != 0x0A:
        return False
    position = 1
    while position < len(head) and head[position] & 0x80:  # the varint length of the first piece
        position += 1
    return position + 1 < len(head) and head[position + 1] == 0x0A


# --- tiktoken: *.tiktoken, 'base64 rank' lines --------------------------------------------------------------------

# a non-empty base64 token (groups of four characters), a space, a rank
RANK_LINE = re.compile(rb"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=) [0-9]{1,9}")


def tiktoken(probe: Probe) -> bool:
    if probe.path.suffix == ".tiktoken":
        return True
    first = probe.head[:256].split(b"\n", 1)[0].rstrip(b"\r\n")
    return bool(RANK_LINE.fullmatch(first))


# --- byte-bpe: minbpe's *.model, JSON merges ----------------------------------------------------------------------

MINBPE_MAGIC = "minbpe v1"


def line_of(head: bytes) -> str:
    return head[:len(MINBPE_MAGIC) + 2].split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1")


def is_merge_pair(item: Any) -> bool:
    return isinstance(item, list) and len(item) == 2 and all(is_id(part) for part in item)


def merges_in(doc: Any) -> list[Any] | None:
    if isinstance(doc, dict) and isinstance(merges := doc.get("merges"), list):
        return merges
    if isinstance(doc, list) and doc:
        return doc
    return None


def byte_bpe(probe: Probe) -> bool:
    if line_of(probe.head) == MINBPE_MAGIC:
        return True
    merges = merges_in(sniff_json(probe.path))
    return merges is not None and all(is_merge_pair(item) for item in merges)


# --- harris: segments ---------------------------------------------------------------------------------------------

HARRIS_FILE = "harris_segments.json"


def segments_in(doc: Any) -> list[Any] | None:
    if isinstance(doc, dict) and isinstance(segments := doc.get("segments"), list):
        return segments
    if isinstance(doc, list):
        return doc
    return None


def harris(probe: Probe) -> bool:
    if probe.path.name == HARRIS_FILE:
        return True
    segments = segments_in(sniff_json(probe.path))
    return segments is not None and bool(segments) and all(isinstance(segment, str) for segment in segments)


# --- nanogpt-chars: meta.pkl --------------------------------------------------------------------------------------

META_FILE = "meta.pkl"
# a dataset name from a checkpoint's config is a folder name, never a path that climbs out of data/
DATASET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
PICKLE_PROTOCOL_2_UP = b"\x80"


def nanogpt_meta(probe: Probe) -> bool:
    if probe.path.suffix != ".pkl":
        return False
    head = probe.head
    if probe.path.name == META_FILE:
        return head.startswith(PICKLE_PROTOCOL_2_UP)
    return head.startswith(PICKLE_PROTOCOL_2_UP) and (b"stoi" in head or b"itos" in head)


def related_paths(directory: Path, config: dict[str, Any]) -> list[Path]:
    """Where nanoGPT's sample.py would find the vocabulary: data/<dataset>/meta.pkl under the working
    directory, then under the checkpoint's folder and each folder above it."""
    dataset = config.get("dataset")
    if not isinstance(dataset, str) or not DATASET_NAME.fullmatch(dataset):
        return []
    relative = Path("data") / dataset / META_FILE
    directory = directory.resolve()
    return list(dict.fromkeys(base / relative for base in (Path.cwd(), directory, *directory.parents)))


# --- char-map: a JSON object of ids -------------------------------------------------------------------------------

# token2id.json: g2p_id 0.4.2 keeps its BERT's character map so, beside bert_mlm.onnx
CHAR_MAP_FILES = ("characters.json", "char_to_id.json", "char2idx.json", "word_index.json", "token2id.json")
# other kinds' documents are JSON objects too: a tokenizer.json, a merges.json, harris segments
OTHER_KINDS_KEYS = ("model", "merges", "segments")


def char_map(probe: Probe) -> bool:
    """A JSON object, not another kind's, whose values are mostly ids (load names the first that is not)."""
    doc = sniff_json(probe.path)
    if not isinstance(doc, dict) or not doc or any(key in doc for key in OTHER_KINDS_KEYS):
        return False
    return 2 * sum(map(is_id, doc.values())) >= len(doc)
