"""analogy: 3CosAdd and 3CosMul checked against gensim's most_similar, most_similar_cosmul and
evaluate_word_analogies on the same vectors, and against plain numpy; the CLI's answers and errors."""

from __future__ import annotations

import os

import numpy as np
import pytest
from byte_tokenizer import ByteWordTokenizer
from conftest import run, run_json

import embscope
from embscope.analysis import analogy as analogy_module
from embscope.analysis.analogy import analogy, evaluate, read_questions
from embscope.compute import topk_scores

PAIRS = [("king", "queen"), ("man", "woman"), ("lord", "lady"), ("prince", "princess"), ("father", "mother"),
         ("son", "daughter"), ("boy", "girl"), ("uncle", "aunt"), ("paris", "france"), ("rome", "italy"),
         ("berlin", "germany"), ("madrid", "spain"), ("tokyo", "japan"), ("oslo", "norway")]
WORDS = tuple(w for pair in PAIRS for w in pair)
ROWS, DIM = 256 + len(WORDS) + 2, 24  # two padding rows past the tokenizer
QUESTIONS = """: family
man woman king queen
man woman lord lady
king queen prince princess
father mother son daughter
boy girl uncle aunt
son daughter boy girl
man woman zebra quagga
not four words
: capitals
paris france rome italy
rome italy berlin germany
berlin germany madrid spain
madrid spain tokyo japan
tokyo japan oslo norway
oslo norway paris france
"""


def make_table() -> np.ndarray:
    """Noise for the byte rows; each pair shares a base row, and its second word adds an offset of its kind."""
    rng = np.random.default_rng(7)
    table = rng.standard_normal((ROWS, DIM))
    offsets = {"family": rng.standard_normal(DIM), "capitals": rng.standard_normal(DIM)}
    for n, (first, second) in enumerate(PAIRS):
        base = rng.standard_normal(DIM)
        offset = offsets["family" if n < 8 else "capitals"]
        table[256 + WORDS.index(first)] = base + 0.7 * rng.standard_normal(DIM)
        table[256 + WORDS.index(second)] = base + offset + 0.7 * rng.standard_normal(DIM)
    return table.astype(np.float32)


TABLE = make_table()


def keys() -> list[str]:
    return [WORDS[i - 256] if 256 <= i < 256 + len(WORDS) else f"#{i}" for i in range(ROWS)]


@pytest.fixture
def kv():
    gensim = pytest.importorskip("gensim.models", reason="gensim is not installed")
    vectors = gensim.KeyedVectors(DIM)
    vectors.add_vectors(keys(), TABLE)
    return vectors


@pytest.fixture
def ckpt(tmp_path, monkeypatch):
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=TABLE)
    monkeypatch.setattr(embscope.Embeddings, "tokenizer", property(lambda self: ByteWordTokenizer(words=WORDS)))
    return path


@pytest.fixture
def emb(ckpt):
    return embscope.open(ckpt)


def unboxed(text: str) -> str:
    """A usage error as one line, with or without typer's box around it."""
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def ids_of(found) -> list[int]:
    return [keys().index(key) for key, _ in found]


def test_3cosadd_matches_gensim_most_similar(emb, kv):
    result = analogy(emb, "king", "man", "woman", k=10)
    expected = kv.most_similar(positive=["king", "woman"], negative=["man"], topn=10)
    assert [a.id for a in result.answers] == ids_of(expected)
    assert [a.score for a in result.answers] == pytest.approx([s for _, s in expected], rel=1e-5)
    assert result.method == "3cosadd" and result.epsilon is None
    assert (result.a.id, result.b.id, result.c.id) == (256, 258, 259)


def test_3cosmul_matches_gensim_most_similar_cosmul(emb, kv):
    result = analogy(emb, "paris", "france", "italy", k=10, method="3cosmul", epsilon=1e-6)  # gensim's epsilon
    expected = kv.most_similar_cosmul(positive=["paris", "italy"], negative=["france"], topn=10)
    assert [a.id for a in result.answers] == ids_of(expected)
    assert [a.score for a in result.answers] == pytest.approx([s for _, s in expected], rel=1e-5)


def test_3cosmul_default_epsilon_is_the_papers(emb):
    result = analogy(emb, "king", "man", "woman", k=5, method="3cosmul")
    assert result.epsilon == 0.001
    t = TABLE.astype(np.float64)
    unit = t / np.linalg.norm(t, axis=1, keepdims=True)
    shifted = [(unit @ unit[i] + 1) / 2 for i in (256, 258, 259)]
    scores = shifted[0] * shifted[2] / (shifted[1] + 0.001)
    scores[[256, 258, 259]] = -np.inf
    best = np.argsort(-scores, kind="stable")[:5]
    assert [a.id for a in result.answers] == best.tolist()
    assert [a.score for a in result.answers] == pytest.approx(scores[best], rel=1e-12)


@pytest.mark.parametrize("epsilon", [0, -1.0, float("nan"), float("inf"), "0.001"])
def test_an_epsilon_that_keeps_no_ratio_finite_is_refused(emb, epsilon, capfd):
    # NaN raised ValueError from the top-k; -1 divided by zero (numpy's RuntimeWarning on stderr) and answered ' '
    with pytest.raises(embscope.OptionError, match="expected an epsilon above 0 and finite") as err:
        analogy(emb, "king", "man", "woman", method="3cosmul", epsilon=epsilon)
    assert err.value.option == "epsilon" and capfd.readouterr().err == ""
    with pytest.raises(embscope.OptionError, match="epsilon"):
        evaluate(emb, read_questions(["king man woman queen"]), method="3cosmul", epsilon=epsilon)


def test_file_accuracy_matches_gensim_evaluate_word_analogies(emb, kv, tmp_path):
    path = tmp_path / "questions.txt"
    path.write_text(QUESTIONS)
    _, sections = kv.evaluate_word_analogies(str(path), restrict_vocab=ROWS, case_insensitive=False)
    found = evaluate(emb, read_questions(QUESTIONS.splitlines()))
    expected = {s["section"]: (len(s["correct"]), len(s["correct"]) + len(s["incorrect"])) for s in sections}
    assert {s.section: (s.correct, s.asked) for s in found.sections} == {
        name: counts for name, counts in expected.items() if name != "Total accuracy"}
    assert (found.overall.correct, found.overall.asked) == expected["Total accuracy"]
    assert 0 < found.overall.correct < found.overall.asked  # some right, some wrong: the comparison means something
    assert found.skipped == {"multi_token": 1} and found.malformed == (9,)


def test_file_accuracy_by_3cosmul_matches_gensim_most_similar_cosmul(emb, kv):
    # gensim 4.4's evaluate_word_analogies takes similarity_function but always runs 3CosAdd: ask question by question
    questions = read_questions(QUESTIONS.splitlines())
    found = evaluate(emb, questions, method="3cosmul", epsilon=1e-6)
    right: dict[str, list[bool]] = {}
    for q in questions.questions:
        a, b, c, d = q.words
        if all(w in kv.key_to_index for w in q.words):
            best = kv.most_similar_cosmul(positive=[b, c], negative=[a], topn=1)[0][0]
            right.setdefault(q.section, []).append(best == d)
    assert {s.section: (s.correct, s.asked) for s in found.sections} == {
        name: (sum(marks), len(marks)) for name, marks in right.items()}
    assert 0 < found.overall.correct < found.overall.asked


def test_the_file_is_answered_in_blocks_alike(emb, monkeypatch):
    questions = read_questions(QUESTIONS.splitlines())
    whole = evaluate(emb, questions)
    monkeypatch.setattr(analogy_module, "SCORE_BLOCK_BYTES", 1)  # one question per block
    assert evaluate(emb, questions) == whole
    assert evaluate(emb, questions, method="3cosmul") == evaluate(emb, questions, method="3cosmul")


def test_the_one_topk_over_ratios_breaks_ties_by_id_pads_and_does_not_clip():
    scores = np.array([[0.5, 0.9, 0.9, -np.inf, 0.9]], dtype=np.float32)
    ids, values = topk_scores(scores, 2)
    assert ids.tolist() == [[1, 2]]
    ids, values = topk_scores(scores, 5)
    assert ids.tolist() == [[1, 2, 4, 0, -1]] and np.isnan(values[0, 4])
    ratios = np.random.default_rng(0).random((40, 3000)).astype(np.float32) * 50  # 3CosMul ratios pass 1
    ratios[:, 7] = ratios[:, 8] = 60.0  # a tie at the top: the lower column first
    ids, values = topk_scores(ratios, 6)
    expected = np.argsort(-ratios, axis=1, kind="stable")[:, :6]
    assert np.array_equal(ids, expected)
    assert np.array_equal(values, np.take_along_axis(ratios, expected, axis=1).astype(np.float64))


def test_cli_json_names_the_method_and_results(ckpt, kv):
    doc = run_json("analogy", "-c", ckpt, "king", "man", "woman", "-k", "3")
    assert doc["checkpoint"] == str(ckpt) and doc["step"] is None
    assert doc["method"] == "3cosadd" and doc["expression"] == "king - man + woman"
    expected = kv.most_similar(positive=["king", "woman"], negative=["man"], topn=3)
    assert [r["id"] for r in doc["results"]] == ids_of(expected)
    tokenizer = ByteWordTokenizer(words=WORDS)
    assert [r["token"] for r in doc["results"]] == [tokenizer.token_string(i) for i in ids_of(expected)]
    assert set(doc["results"][0]) == {"id", "token", "score"}
    assert doc["query"]["a"]["note"] == "the space before 'king' is a token of its own (id 32), so it was left out"
    by_ids = run_json("analogy", "-c", ckpt, "--ids", "256", "258", "259", "-k", "3")
    assert by_ids["results"] == doc["results"]


def test_cli_console(ckpt):
    text = run("analogy", "-c", ckpt, "king", "man", "woman", "--method", "3cosmul", "-k", "2").stdout
    lines = text.splitlines()
    assert lines[0] == f"checkpoint: {ckpt} (step unknown)"
    assert lines[1] == ("king - man + woman  (3CosMul, epsilon 0.001, token table 'token_emb'; the three inputs "
                        "are left out)")
    assert lines[2] == "using king = 256 'king', man = 258 'man', woman = 259 'woman'"
    assert ("note: king, man, woman: the space before the word is a token of its own (id 32), so it was left out"
            in " ".join(text.split()))  # one note for three words alike


def test_cli_file(ckpt, tmp_path):
    path = tmp_path / "q.txt"
    path.write_text(QUESTIONS)
    doc = run_json("analogy", "-c", ckpt, "--file", path)
    assert [s["section"] for s in doc["sections"]] == ["family", "capitals"]
    assert doc["skipped"] == {"multi_token": 1} and doc["malformed_lines"] == [9]
    family = doc["sections"][0]
    assert family["asked"] == 6 and family["skipped"] == 1
    assert family["accuracy"] == pytest.approx(family["correct"] / 6)
    text = run("analogy", "-c", ckpt, "--file", path).stdout
    assert "skipped 1 question: 1 with a word of several tokens" in text
    assert "ignored 1 line that is neither `: section` nor four words: line 9" in text


def test_cli_errors(ckpt, tmp_path):
    two = run("analogy", "-c", ckpt, "king", "man", code=2)
    assert two.exit_code == 2 and "expected three words A B C (A - B + C), found 2" in unboxed(two.output)
    split = run("analogy", "-c", ckpt, "king", "man", "zebra", code=1)
    assert split.exit_code == 1
    assert split.stderr == ("Error: expected 'zebra' to be one token, found 5 ('z' 'e' 'b' 'r' 'a'): an analogy "
                            "uses one row per word\n")
    path = tmp_path / "q.txt"
    path.write_text(QUESTIONS)
    both = run("analogy", "-c", ckpt, "king", "--file", path, code=2)
    assert both.exit_code == 2 and "--file takes its questions from the file, not from words" in unboxed(both.output)
    path.write_text("only three words\n")
    none = run("analogy", "-c", ckpt, "--file", path, code=1)
    assert none.exit_code == 1
    assert none.stderr == (f"Error: expected analogy questions in '{path}' (`: section` lines, then four words a "
                           "line), found none\n")


def test_a_zero_input_row_has_no_answer(tmp_path, monkeypatch):
    table = TABLE.copy()
    table[258] = 0
    path = tmp_path / "zero.npz"
    np.savez(path, token_emb=table)
    monkeypatch.setattr(embscope.Embeddings, "tokenizer", property(lambda self: ByteWordTokenizer(words=WORDS)))
    doc = run_json("analogy", "-c", path, "king", "man", "woman")
    assert doc["results"] == []
    assert doc["reason"] == "row 258 ('man') for 'man' is zero or holds NaN or Inf: it has no direction"


def test_a_table_with_no_other_row_says_so(tmp_path):
    path = tmp_path / "three.npz"
    np.savez(path, token_emb=TABLE[:3])
    doc = run_json("analogy", "-c", path, "--ids", "0", "1", "2")
    assert doc["results"] == []
    assert doc["reason"] == ("no row is left to answer: the table has 3 rows, the inputs are left out, and zero rows "
                             "or rows holding NaN or Inf never answer")


def test_the_sample_answers_father_man_woman():
    doc = run_json("analogy", "father", "man", "woman", "-k", "3")
    emb = embscope.open()
    t = emb.token.array.astype(np.float64)
    unit = t / np.linalg.norm(t, axis=1, keepdims=True)
    inputs = [doc["query"][k]["id"] for k in "abc"]
    direction = unit[inputs[0]] - unit[inputs[1]] + unit[inputs[2]]
    scores = unit @ direction / np.linalg.norm(direction)
    scores[inputs] = -np.inf
    best = np.argsort(-scores, kind="stable")[:3]
    assert [r["id"] for r in doc["results"]] == best.tolist()
    assert doc["results"][0]["token"] == "mother"


def test_cli_file_is_a_regular_file_read_a_line_at_a_time(ckpt, tmp_path):
    fifo = tmp_path / "questions"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a named pipe (FIFO)"), ("/dev/zero", "a character device")):  # a hang; one endless line
        result = run("analogy", "-c", ckpt, "--file", path, code=1)
        assert result.stderr == f"Error: expected a regular file for --file, found {kind} at '{path}'\n"
    long_line = tmp_path / "long.txt"
    long_line.write_text("king man woman queen\n" + "x" * 100_000 + "\n")
    result = run("analogy", "-c", ckpt, "--file", long_line, code=1)
    assert result.stderr == f"Error: '{long_line}' line 2: expected a line of text, found one longer than 4,096 bytes\n"


def test_a_k_past_the_table_says_how_many_rows_answered(ckpt):
    doc = run_json("analogy", "-c", ckpt, "--ids", "256", "258", "259", "-k", 10**18)
    assert len(doc["results"]) == ROWS - 3  # every row but the three inputs
    assert doc["notes"][-1] == f"-k {10**18:,} asks for more rows than there are: all {ROWS - 3} rows that can answer are listed"
    text = " ".join(run("analogy", "-c", ckpt, "--ids", "256", "258", "259", "-k", 10**18).stdout.split())
    assert f"note: -k {10**18:,} asks for more rows than there are" in text
