"""Smoke test for sample_checkpoints/training/train.py: tokenizer, a few training steps, all four exports."""

import importlib.util
import json
import pickle
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

TRAIN_PY = Path(__file__).resolve().parents[1] / "sample_checkpoints" / "training" / "train.py"


def _load_train_module():
    spec = importlib.util.spec_from_file_location("sample_train", TRAIN_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sample_train"] = module
    spec.loader.exec_module(module)
    return module


T = _load_train_module()

# Public-domain text (Hamlet III.i), repeated to a few KB.
CORPUS = """HAMLET.
To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles,
And by opposing end them? To die: to sleep;
No more; and by a sleep to say we end
The heart-ache and the thousand natural shocks
That flesh is heir to, 'tis a consummation
Devoutly to be wish'd. To die, to sleep;
To sleep: perchance to dream: ay, there's the rub;
For in that sleep of death what dreams may come
When we have shuffled off this mortal coil,
Must give us pause: there's the respect
That makes calamity of so long life; 1601.

""" * 6


@pytest.fixture(scope="module")
def tokenizer():
    return T.BPETokenizer.train(CORPUS, vocab_size=256 + 60)


def test_bpe_round_trips_and_keeps_space_alone(tokenizer):
    ids = tokenizer.encode(CORPUS)
    assert tokenizer.decode(ids) == CORPUS
    assert len(ids) < len(CORPUS.encode())  # merges actually compress
    assert ids.count(32) == CORPUS.count(" ")  # every space is its own token
    assert max(ids) >= 256
    word_ids = tokenizer.encode("sleep")
    assert tokenizer.encode(" sleep") == [32] + word_ids
    assert len(word_ids) == 1  # a frequent word became one token
    assert tokenizer.decode(tokenizer.encode("naïve — ünïcode ok\n")) == "naïve — ünïcode ok\n"


def test_bpe_ids_follow_merge_order(tokenizer):
    for k, (a, b) in enumerate(tokenizer.merges):
        assert tokenizer.vocab[256 + k] == tokenizer.vocab[a] + tokenizer.vocab[b]
        assert a < 256 + k and b < 256 + k
    assert len(set(tokenizer.vocab)) == tokenizer.vocab_size


def test_minbpe_model_file_round_trips(tokenizer, tmp_path):
    path = tmp_path / "tokenizer.model"
    tokenizer.save_model(path)
    lines = path.read_text().splitlines()
    assert lines[0] == "minbpe v1"
    assert lines[1] == T.SPLIT_PATTERN
    assert lines[2] == "0"
    assert lines[3] == "{} {}".format(*tokenizer.merges[0])
    assert len(lines) == 3 + len(tokenizer.merges)
    again = T.BPETokenizer.load_model(path)
    assert again.encode(CORPUS) == tokenizer.encode(CORPUS)


def test_hf_tokenizer_json_gives_identical_ids(tokenizer):
    pytest.importorskip("tokenizers")
    ok, detail = T.hf_ids_match(tokenizer, CORPUS + "Zounds!  two  spaces\n\n\n42 x")
    assert ok, detail


def _numpy_forward(params, ids, n_head):
    """An independent numpy forward pass of the nlm layout (y = x @ W + b)."""
    def ln(x, s, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * s + b

    def gelu(x):
        from math import erf
        return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))

    x = params["token_emb"][ids] + params["pos_emb"][: len(ids)]
    n, d = x.shape
    hs = d // n_head
    mask = np.triu(np.full((n, n), -np.inf), 1)
    i = 0
    while f"layer{i}.attn.q" in params:
        p = f"layer{i}."
        h = ln(x, params[p + "ln1.scale"], params[p + "ln1.bias"])
        q, k, v = (h @ params[p + f"attn.{c}"] + params[p + f"attn.{c}_bias"] for c in "qkv")
        heads = []
        for j in range(n_head):
            sl = slice(j * hs, (j + 1) * hs)
            att = q[:, sl] @ k[:, sl].T / np.sqrt(hs) + mask
            att = np.exp(att - att.max(-1, keepdims=True))
            heads.append((att / att.sum(-1, keepdims=True)) @ v[:, sl])
        x = x + np.concatenate(heads, axis=1) @ params[p + "attn.o"] + params[p + "attn.o_bias"]
        h = ln(x, params[p + "ln2.scale"], params[p + "ln2.bias"])
        h = gelu(h @ params[p + "mlp.fc"] + params[p + "mlp.fc_bias"])
        x = x + h @ params[p + "mlp.proj"] + params[p + "mlp.proj_bias"]
        i += 1
    x = ln(x, params["ln_final.scale"], params["ln_final.bias"])
    return x @ params["token_emb"].T


def test_train_and_export_all_formats(tokenizer, tmp_path):
    from safetensors.numpy import load_file

    ids = np.array(tokenizer.encode(CORPUS), dtype=np.int32)
    cfg = T.ModelConfig(vocab_size=tokenizer.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=16)
    tc = T.TrainConfig(steps=4, batch_size=4, warmup=2, eval_every=2, eval_batches=1, threads=1)
    model, history, best_val = T.train(ids, cfg, tc, log=lambda _: None)
    assert [h["step"] for h in history] == [0, 2, 4]
    assert all(np.isfinite(h["train"]) and np.isfinite(h["val"]) for h in history)

    params = T.model_to_params(model, cfg)
    n_params = sum(p.numel() for p in model.parameters())  # tied head counted once
    assert sum(v.size for v in params.values()) == n_params

    # The nlm layout computes the same logits as the torch model it came from.
    x = torch.tensor(ids[: cfg.block_size], dtype=torch.long)[None]
    with torch.no_grad():
        torch_logits = model(x)[0][0].numpy()
    np.testing.assert_allclose(_numpy_forward(params, ids[: cfg.block_size], cfg.n_head),
                               torch_logits, rtol=1e-4, atol=1e-4)

    config = {**T.asdict(cfg), "best_val_loss": best_val}
    T.export_all(params, tc.steps, config, tokenizer, tmp_path)

    for rel in ["nlm/model.pkl", "nanogpt/ckpt.pt", "hf/config.json", "hf/model.safetensors",
                "hf/tokenizer.json", "andrea/model.bin", "andrea/config.json"]:
        assert (tmp_path / rel).is_file(), rel
    for folder in ["nlm", "nanogpt", "hf", "andrea"]:
        assert (tmp_path / folder / "tokenizer.model").read_text().startswith("minbpe v1\n")

    tok_table, pos_table = params["token_emb"], params["pos_emb"]
    assert tok_table.shape == (tokenizer.vocab_size, 16) and pos_table.shape == (16, 16)

    with open(tmp_path / "nlm/model.pkl", "rb") as f:
        nlm = pickle.load(f)
    assert nlm["step"] == 4 and type(nlm["step"]) is int
    assert all(type(v) is np.ndarray and v.dtype == np.float32 for v in nlm["params"].values())
    assert "lm_head" not in " ".join(nlm["params"])

    ckpt = torch.load(tmp_path / "nanogpt/ckpt.pt", weights_only=True)
    sd = ckpt["model"]
    assert ckpt["iter_num"] == 4
    assert ckpt["model_args"] == {"n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 16,
                                  "bias": True, "vocab_size": tokenizer.vocab_size, "dropout": 0.0}
    assert sd["lm_head.weight"].data_ptr() == sd["transformer.wte.weight"].data_ptr()
    # The nanoGPT state dict drives a fresh model to the same logits.
    fresh = T.build_model(cfg)
    fresh.load_state_dict(sd)
    with torch.no_grad():
        np.testing.assert_allclose(fresh(x)[0][0].numpy(), torch_logits, rtol=1e-5, atol=1e-5)

    st = load_file(str(tmp_path / "hf/model.safetensors"))
    assert "lm_head.weight" not in st
    assert st["h.1.attn.c_attn.weight"].shape == (16, 48)
    hf_cfg = json.loads((tmp_path / "hf/config.json").read_text())
    assert hf_cfg["model_type"] == "gpt2" and hf_cfg["tie_word_embeddings"] is True
    assert (hf_cfg["vocab_size"], hf_cfg["n_positions"], hf_cfg["n_embd"]) == (tokenizer.vocab_size, 16, 16)

    raw = (tmp_path / "andrea/model.bin").read_bytes()
    step, n = struct.unpack("<ii", raw[:8])
    assert (step, n) == (4, n_params) and len(raw) == 8 + 4 * n
    flat = np.frombuffer(raw, dtype="<f4", offset=8)
    V, d = tok_table.shape
    andrea_tok = flat[: V * d].reshape(V, d)
    andrea_pos = flat[V * d: V * d + 16 * d].reshape(16, d)
    acfg = json.loads((tmp_path / "andrea/config.json").read_text())
    assert (acfg["vocab_size"], acfg["d_model"], acfg["context"], acfg["n_layers"], acfg["n_heads"]) \
        == (V, d, 16, 2, 2)

    for name, tok_t, pos_t in [
        ("nlm", nlm["params"]["token_emb"], nlm["params"]["pos_emb"]),
        ("nanogpt", sd["transformer.wte.weight"].numpy(), sd["transformer.wpe.weight"].numpy()),
        ("hf", st["wte.weight"], st["wpe.weight"]),
        ("andrea", andrea_tok, andrea_pos),
    ]:
        assert np.array_equal(tok_t, tok_table), name
        assert np.array_equal(pos_t, pos_table), name


def test_snapshots_read_the_run_without_changing_it(tokenizer, tmp_path):
    ids = np.array(tokenizer.encode(CORPUS), dtype=np.int32)
    cfg = T.ModelConfig(vocab_size=tokenizer.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16)
    tc = T.TrainConfig(steps=4, batch_size=4, warmup=2, eval_every=4, eval_batches=1, threads=1)
    plain, _, _ = T.train(ids, cfg, tc, log=lambda _: None)
    seen = {}

    def snapshot(step, model):
        seen[step] = T.model_to_params(model, cfg)["token_emb"].copy()
        T.export_snapshot(model, cfg, step, tokenizer, tmp_path)

    watched, _, _ = T.train(ids, cfg, tc, log=lambda _: None, snapshot=snapshot, snapshot_steps=frozenset({2}))
    for (name, a), b in zip(plain.state_dict().items(), watched.state_dict().values()):
        assert torch.equal(a, b), name  # the same run, bit for bit
    assert list(seen) == [2] and not np.array_equal(seen[2], T.model_to_params(watched, cfg)["token_emb"])
    with open(tmp_path / "nlm_step2" / "model.pkl", "rb") as f:
        saved = pickle.load(f)
    assert saved["step"] == 2 and np.array_equal(saved["params"]["token_emb"], seen[2])
    assert (tmp_path / "nlm_step2" / "tokenizer.model").read_text().startswith("minbpe v1\n")
