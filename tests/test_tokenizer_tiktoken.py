"""tiktoken: a small .tiktoken file written here (base64 token, rank), ids worked out by hand from its
ranks; encodings by name, loaded from tiktoken's cache only, never downloaded."""

from __future__ import annotations

import base64
import socket
import sys
from pathlib import Path

import pytest

from embscope.core.errors import CheckpointError, EmbscopeError, TokenError
from embscope.tokenizers import Tokenizer, load_tokenizer

pytest.importorskip("tiktoken")

# rank = id: the 256 bytes, then merged tokens, each reachable by merging two lower-ranked ones
MERGED = {b"do": 256, b"dog": 257, b" dog": 258, b"12": 259, b"45": 260, b"123": 261, b"12345": 262, b"zz": 270}
DOG, SPACE_DOG, N123, N45, N12345 = 257, 258, 261, 260, 262


def write_tiktoken(path: Path, ranks: dict[bytes, int] | None = None) -> Path:
    ranks = ranks if ranks is not None else {bytes([b]): b for b in range(256)} | MERGED
    path.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
    return path


def test_tiktoken_file_by_hand(tmp_path):
    tokenizer = load_tokenizer(write_tiktoken(tmp_path / "cl100k_base.tiktoken"))
    assert tokenizer.kind == "tiktoken" and isinstance(tokenizer, Tokenizer)
    assert tokenizer.vocab_size == 271
    assert tokenizer.encode(" dog") == [SPACE_DOG]  # " " + "do" + "g" -> " " + "dog" -> " dog"
    assert tokenizer.encode("dogs") == [DOG, ord("s")]
    # cl100k's pattern cuts numbers into groups of three: "123" "45"
    assert tokenizer.encode("12345") == [N123, N45]
    assert [tokenizer.token_string(id) for id in (SPACE_DOG, 0xC3)] == [" dog", "\\xc3"]
    assert tokenizer.decode(tokenizer.encode("naïve dog")) == "naïve dog"
    assert tokenizer.notes == ()
    assert (tokenizer.unk_id, tokenizer.special_ids) == (None, frozenset())


def test_split_pattern_follows_the_file_name(tmp_path):
    # GPT-2's pattern keeps a run of digits whole: "12345" merges to one token
    assert load_tokenizer(write_tiktoken(tmp_path / "gpt2.tiktoken")).encode("12345") == [N12345]
    other = load_tokenizer(write_tiktoken(tmp_path / "mine.tiktoken"))
    assert other.encode("12345") == [N123, N45]  # the default, cl100k_base's
    assert other.notes == (
        ("split pattern: cl100k_base's, the default for a .tiktoken file whose name is not an encoding's "
         "(gpt2, r50k_base, p50k_base, p50k_edit, cl100k_base, o200k_base, o200k_harmony)"),
    )


def test_unused_ranks_are_holes(tmp_path):
    tokenizer = load_tokenizer(write_tiktoken(tmp_path / "t.tiktoken"))
    with pytest.raises(TokenError) as err:
        tokenizer.token_string(265)
    assert str(err.value) == "token id 265 is not used by the tiktoken tokenizer t.tiktoken"
    assert tokenizer.token_string(270) == "zz"


def test_llama3_style_tokenizer_model(tmp_path):
    # Meta ships Llama 3's tiktoken ranks as tokenizer.model: found beside the weights by content
    write_tiktoken(tmp_path / "tokenizer.model")
    from embscope.tokenizers import find_tokenizer

    assert find_tokenizer(tmp_path).kind == "tiktoken"


def test_damaged_files(tmp_path):
    ranks = {bytes([b]): b for b in range(256) if b != 0x7A}
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(write_tiktoken(tmp_path / "t.tiktoken", ranks))
    assert str(err.value) == "expected all 256 single bytes among the tokens of t.tiktoken, found 1 missing (the first is 0x7a)"
    (tmp_path / "t.tiktoken").write_bytes(b"YQ== 0\nYg== 0\n")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "t.tiktoken")
    assert str(err.value) == (
        "expected a new token and a new rank up to 16,777,215 on line 2 of t.tiktoken, found b'b' 0"
    )
    (tmp_path / "t.tiktoken").write_bytes(b"YQ== 0\nnot base64!\n")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "t.tiktoken")
    assert str(err.value) == "expected 'base64-token rank' on line 2 of t.tiktoken, found b'not base64!'"


def test_without_the_package(tmp_path, monkeypatch):
    path = write_tiktoken(tmp_path / "t.tiktoken")
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(EmbscopeError) as err:
        load_tokenizer(path)
    assert str(err.value) == "reading t.tiktoken needs the 'tiktoken' package (pip install 'embscope[tiktoken]')"
    with pytest.raises(EmbscopeError) as err:
        load_tokenizer("gpt2")
    assert str(err.value) == "the tokenizer 'gpt2' needs the 'tiktoken' package (pip install 'embscope[tiktoken]')"


# ---------------------------------------------------------------- by name


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("embscope tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_name_not_in_the_cache_is_one_line_and_no_download(tmp_path, monkeypatch, no_network):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(EmbscopeError) as err:
        load_tokenizer("cl100k_base")
    assert str(err.value) == (
        "cannot load the tiktoken encoding 'cl100k_base' without downloading it, and embscope never downloads: "
        f"its files are not in tiktoken's cache {tmp_path / 'cache'} (set TIKTOKEN_CACHE_DIR to a folder that "
        "holds them)"
    )
    assert not (tmp_path / "cache").exists()


def test_name_of_an_encoding_tiktoken_can_load(tmp_path, monkeypatch, no_network):
    """An encoding tiktoken builds from local files (a plugin's, here registered for the test)."""
    import tiktoken
    import tiktoken.registry

    ranks_file = write_tiktoken(tmp_path / "ranks.tiktoken")

    def constructor():
        return {"name": "tiny_test", "pat_str": r"""'s|'t| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+""",
                "mergeable_ranks": tiktoken.load.load_tiktoken_bpe(str(ranks_file)),
                "special_tokens": {"<|endoftext|>": 300}}

    tiktoken.registry.list_encoding_names()  # fills the registry's table of constructors
    monkeypatch.setitem(tiktoken.registry.ENCODING_CONSTRUCTORS, "tiny_test", constructor)
    monkeypatch.chdir(tmp_path)
    tokenizer = load_tokenizer("tiny_test")
    assert (tokenizer.kind, tokenizer.path, tokenizer.vocab_size) == ("tiktoken", Path("tiny_test"), 301)
    # special tokens are matched whole in text, as nanoGPT's sample.py encodes (allowed_special={"<|endoftext|>"})
    # and tiktoken's encode allows them (its default refuses such text rather than encode it as ordinary text)
    encoding = tiktoken.get_encoding("tiny_test")
    for text in ("<|endoftext|>", " dog<|endoftext|>dog", "<|endoftext"):
        assert tokenizer.encode(text) == encoding.encode(text, allowed_special="all")
    assert tokenizer.encode("<|endoftext|>") == [300]
    assert tokenizer.encode("<|endoftext") == [60, 124, 101, 110, 256, 102, 116, 101, 120, 116]
    assert tokenizer.special_ids == {300}
    assert tokenizer.token_string(300) == "<|endoftext|>"
    assert tokenizer.decode([SPACE_DOG, 300]) == " dog<|endoftext|>"


def test_a_file_of_that_name_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tiktoken(tmp_path / "gpt2")  # a path that exists is always read as a file
    assert load_tokenizer("gpt2").path == Path("gpt2")
    assert load_tokenizer("gpt2").encode("12345") == [N12345]  # and its name picks GPT-2's split pattern


def test_unknown_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError) as err:
        load_tokenizer("nonesuch")
    message = str(err.value)
    assert message.startswith("expected a tokenizer file or a tokenizer name, found neither: 'nonesuch' is no file "
                              "here and no name known (tiktoken gpt2, r50k_base, ")
