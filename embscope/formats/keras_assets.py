"""The tokenizer a .keras zip carries: keras-hub's tokenizers keep their vocabulary as assets, which Keras'
saving_lib writes under the zip's assets/ at the tokenizer's attribute path (a CausalLM's
'assets/preprocessor/tokenizer/'): BytePairTokenizer's vocabulary.json and merges.txt, WordPieceTokenizer's
vocabulary.txt, SentencePieceTokenizer's vocabulary.spm (keras_hub/src/tokenizers, save_assets). They are read
from the zip in place, each member bounded as formats._zip reads any, and only where config.json names a
tokenizer; nothing is extracted."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from ..core import files
from ..core.errors import Message, Option, TokenizerError
from ..core.text import detail, quote
from ..core.tokenizer import Tokenizer
from ..tokenizers.base import MAX_TOKENIZER_BYTES
from ._zip import ENCRYPTED, read_member

ASSETS = "assets/"
BPE_FILES, WORDPIECE_FILE, SPM_FILE = ("vocabulary.json", "merges.txt"), "vocabulary.txt", "vocabulary.spm"
VOCABULARY_FILES = (BPE_FILES[0], WORDPIECE_FILE, SPM_FILE)


def path_steps(wanted: set[str]) -> dict[str, set[str]]:
    """For each attribute path that begins one in `wanted` ('' and 'preprocessor/' for 'preprocessor/tokenizer/'),
    the keys that lead on toward one."""
    steps: dict[str, set[str]] = {}
    for path in wanted:
        parts = path.split("/")[:-1]
        for i, part in enumerate(parts):
            steps.setdefault("".join(f"{above}/" for above in parts[:i]), set()).add(part)
    return steps


def tokenizer_configs(config: Any, wanted: set[str]) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """The tokenizers config.json names (a class whose name ends in 'Tokenizer') at the attribute paths in `wanted`
    (the folder saving_lib files its assets in: the keys that lead to it, each layer's 'config' left out), and the
    first tokenizer found anywhere. Only paths that lead toward a wanted one are made: made for every object, a long
    key above many objects took gigabytes (a 3 MB config.json 2.5 GB; a 64 MiB one, a few kB deflated, far more)."""
    steps = path_steps(wanted)
    found: dict[str, dict[str, Any]] = {}
    first: dict[str, Any] | None = None
    stack: list[tuple[str | None, Any]] = [("", config)] if isinstance(config, dict) else []
    while stack:
        where, node = stack.pop()
        inner = node.get("config")
        if str(node.get("class_name", "")).endswith("Tokenizer") and isinstance(inner, dict):
            first = inner if first is None else first
            if where in wanted:
                found[where] = inner
        after = steps.get(where, set()) if where is not None else set()
        stack.extend((where if key == "config" else f"{where}{key}/" if key in after else None, value)
                     for key, value in node.items() if isinstance(value, dict))
    return found, first


def asset_folders(found: dict[str, zipfile.ZipInfo]) -> list[str]:
    """The folders under assets/ that hold a vocabulary keras-hub writes."""
    return sorted({name.rsplit("/", 1)[0] + "/" for name in found
                   if name.startswith(ASSETS) and name.rsplit("/", 1)[-1] in VOCABULARY_FILES})


def member_bytes(path: Path, found: dict[str, zipfile.ZipInfo], name: str) -> bytes:
    info = found[name]
    where = f"{quote(path)}: member {quote(name)}"
    if info.flag_bits & ENCRYPTED:
        raise TokenizerError(f"{where}: the zip member is encrypted; refused")
    if info.file_size > MAX_TOKENIZER_BYTES:
        raise TokenizerError(f"{where}: expected a vocabulary of at most {MAX_TOKENIZER_BYTES:,} bytes, found "
                             f"{info.file_size:,} declared; not read")
    return read_member(path, info, where)


def member_text(path: Path, found: dict[str, zipfile.ZipInfo], name: str) -> str:
    try:
        text = member_bytes(path, found, name).decode("utf-8")
    except UnicodeDecodeError as err:
        raise TokenizerError(f"{quote(path)}: member {quote(name)}: expected UTF-8 text, found {detail(err)}") from None
    return files.universal_newlines(text)


def keras_hub_vocabulary(text: str) -> dict[str, int]:
    """vocabulary.txt as keras-hub's WordPieceTokenizer.set_vocabulary reads it, `[line.rstrip() for line in file]`:
    a token a line (line endings already "\n"), its trailing whitespace dropped; a repeated token keeps its last id."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline after the last token
    return dict(zip((line.rstrip() for line in lines), range(len(lines))))


def keras_tokenizer(path: Path, found: dict[str, zipfile.ZipInfo], config: Any) -> Tokenizer | None:
    """The tokenizer in the zip's assets, else one beside the zip, as for any checkpoint."""
    from ..tokenizers import find_tokenizer
    return zip_tokenizer(path, found, config) or find_tokenizer(path.parent)


def zip_tokenizer(path: Path, found: dict[str, zipfile.ZipInfo], config: Any) -> Tokenizer | None:
    """The tokenizer config.json names, from its assets in the zip; None where it names none or the zip holds no
    vocabulary for it."""
    folders = asset_folders(found)
    configs, first = tokenizer_configs(config, {folder[len(ASSETS):] for folder in folders})
    if first is None or not folders:
        return None
    named = [folder for folder in folders if folder[len(ASSETS):] in configs]
    if len(named) != 1 and len(folders) != 1:
        listed = ", ".join(quote(folder) for folder in folders)
        raise TokenizerError(Message(f"{quote(path)}: expected one tokenizer's assets in the .keras zip, found "
                                     f"several ({listed}); name a tokenizer file with ", Option("tokenizer")),
                             option="tokenizer")
    folder = named[0] if len(named) == 1 else folders[0]
    settings = configs.get(folder[len(ASSETS):], first)
    return read_assets(path, found, folder, settings)


def read_assets(path: Path, found: dict[str, zipfile.ZipInfo], folder: str, settings: dict[str, Any]) -> Tokenizer:
    """The tokenizer of one assets folder, by the files keras-hub's tokenizer class writes there."""
    shown = path / folder  # names the member in messages and in info: inside the zip, never a file on disk
    if folder + SPM_FILE in found:
        from ..tokenizers.sentencepiece_model import from_bytes
        return from_bytes(member_bytes(path, found, folder + SPM_FILE), shown / SPM_FILE)
    if folder + WORDPIECE_FILE in found:
        from ..tokenizers.wordpiece import from_settings
        vocab = keras_hub_vocabulary(member_text(path, found, folder + WORDPIECE_FILE))
        unk, suffix = settings.get("oov_token", "[UNK]"), settings.get("suffix_indicator", "##")
        return from_settings(vocab, shown / WORDPIECE_FILE, unk if isinstance(unk, str) else "[UNK]",
                             settings.get("lowercase") is True, settings.get("strip_accents") is True,
                             suffix if isinstance(suffix, str) and suffix else "##")
    vocab_name, merges_name = (folder + name for name in BPE_FILES)
    if merges_name not in found:
        raise TokenizerError(f"{quote(path)}: expected {quote(merges_name)} beside {quote(vocab_name)} in the .keras "
                             "zip, found none")
    try:
        vocab = json.loads(member_text(path, found, vocab_name))
    except (ValueError, RecursionError) as err:
        raise TokenizerError(f"{quote(path)}: member {quote(vocab_name)}: expected JSON, found text json cannot "
                             f"parse ({detail(err)})") from None
    from ..tokenizers.gpt2_bpe import from_contents
    return from_contents(vocab, member_text(path, found, merges_name), shown / BPE_FILES[0], shown / BPE_FILES[1])
