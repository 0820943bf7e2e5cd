"""A model torch.save pickled whole (`torch.save(model)`, the PyTorch tutorial's "save the entire model"): read
without importing its classes, its tensors named as torch's own `model.state_dict()` names them (the reference)."""

from __future__ import annotations

import copyreg
import json
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch
from conftest import invoke, run_json
from pickle_gadgets import assert_error_line
from torch import nn

from embscope.formats import open_checkpoint


@dataclass
class GPTConfig:
    vocab_size: int = 50
    block_size: int = 16
    n_embd: int = 8


@dataclass(slots=True)
class SlotsConfig:
    """A config whose pickle state is (None, {slot: value}), pickle's form for a class with __slots__."""
    block_size: int = 16


class Block(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d, bias=False)  # a None bias in _parameters, which state_dict() skips


class TinyGPT(nn.Module):
    """nanoGPT's layout in small; restoring it would run its __setstate__, which records that it ran."""

    restored: ClassVar[list[str]] = []

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.h = nn.ModuleList([Block(config.n_embd) for _ in range(2)])
        self.drop = nn.Dropout(0.1)  # a module without parameters
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one storage under two names
        self.register_buffer("mask", torch.tril(torch.ones(16, 16)), persistent=False)  # left out of state_dict()
        self.register_buffer("seen", torch.arange(3))  # a persistent buffer: in state_dict()

    def __setstate__(self, state):
        TinyGPT.restored.append(type(self).__name__)
        super().__setstate__(state)


def tiny_model() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(GPTConfig())


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_tensors_are_named_and_read_as_state_dict_gives_them(tmp_path, legacy):
    model = tiny_model()
    path = tmp_path / "model.pt"
    torch.save(model, path, _use_new_zipfile_serialization=not legacy)
    TinyGPT.restored.clear()
    checkpoint = open_checkpoint(path)
    reference = model.state_dict()
    assert list(checkpoint.tensors) == list(reference)  # names and order, the tied head and the buffer included
    for name, tensor in reference.items():
        assert np.array_equal(checkpoint.tensors[name].read(), tensor.numpy()), name
    assert checkpoint.tensors["lm_head.weight"].storage == checkpoint.tensors["wte.weight"].storage
    assert any("whole pickled model of class 'test_whole_model.TinyGPT'" in note and "never imported or run" in note
               for note in checkpoint.notes), checkpoint.notes
    assert TinyGPT.restored == []  # its class was never used to build anything


def test_params_counts_as_torch_does_with_and_without_trust(tmp_path):
    model = tiny_model()
    path = tmp_path / "model.pt"
    torch.save(model, path)
    TinyGPT.restored.clear()
    for extra in ((), ("--trust-pickle",)):
        result = invoke("params", "-c", path, "--json", *extra)
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert doc["total"] == sum(p.numel() for p in model.parameters())  # the tied head once
        assert doc["token"] == 50 * 8 and doc["position"] == 16 * 8 and doc["tied"] is True
    assert TinyGPT.restored == []


def test_a_model_inside_a_training_checkpoint_keeps_its_step_and_config(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"model": tiny_model(), "iter_num": 7}, path)
    checkpoint = open_checkpoint(path)
    assert checkpoint.step == 7
    assert checkpoint.config["block_size"] == 16 and checkpoint.config["vocab_size"] == 50
    assert "wpe.weight" in checkpoint.tensors


class Called:
    """An object whose pickle calls its class (as an Enum's does): that would run code, so it is refused."""

    def __reduce__(self):
        return Called, ()


class CreatedFromArguments:
    """An object created by NEWOBJ from arguments (`cls.__new__(cls, 3)` would run): refused."""

    def __reduce__(self):
        return copyreg.__newobj__, (CreatedFromArguments, 3)


class Plain:
    """An object of attributes only, where a module belongs."""


@pytest.mark.parametrize("attach, fragment", [
    (lambda m: setattr(m.config, "kind", Called()), "refused to unpickle global 'test_whole_model.Called'"),
    (lambda m: setattr(m.config, "kind", CreatedFromArguments()),
     "refused to unpickle global 'test_whole_model.CreatedFromArguments'"),
    (lambda m: m._modules.__setitem__("extra", Plain()),
     ("expected submodule 'extra' of the pickled model to be a module, found an object of class "
      "'test_whole_model.Plain'")),
    (lambda m: m._modules.__setitem__("loop", m), "expected modules nested at most 32 deep"),
], ids=["called", "from-arguments", "not-a-module", "holds-itself"])
def test_what_a_whole_model_cannot_hold_is_one_line(tmp_path, attach, fragment):
    model = tiny_model()
    attach(model)
    path = tmp_path / "model.pt"
    torch.save(model, path)
    assert_error_line(invoke("info", "-c", path), fragment)


def test_an_object_that_is_no_model_is_named(tmp_path):
    path = tmp_path / "config.pt"
    torch.save(GPTConfig(), path)
    assert_error_line(invoke("info", "-c", path), "expected a state dict, a dict holding one or a whole torch.nn "
                      "model, found an object of class 'test_whole_model.GPTConfig'")


def test_a_config_object_beside_a_state_dict_is_read_as_its_attributes(tmp_path):
    """A training script's {"model": state_dict, "config": GPTConfig(...)}: the dataclass was refused before."""
    path = tmp_path / "ckpt.pt"
    torch.save({"model": tiny_model().state_dict(), "config": GPTConfig(block_size=12), "step": 5}, path)
    checkpoint = open_checkpoint(path)
    assert checkpoint.config["block_size"] == 12 and checkpoint.step == 5
    assert not any("whole pickled model" in note for note in checkpoint.notes)


def shared_twice(leaf, levels: int, wrap):
    """`levels` levels that each hold the level below under two names: 2**levels paths in a few KB of pickle."""
    for _ in range(levels):
        leaf = wrap(leaf)
    return leaf


def module_twice(child: nn.Module) -> nn.Module:
    parent = nn.Module()
    parent._modules.update(a=child, b=child)
    return parent


@pytest.mark.parametrize("whole", [True, False], ids=["modules", "dicts"])
def test_a_module_or_dict_shared_under_two_names_at_every_level_is_refused_quickly(tmp_path, monkeypatch, whole):
    """2**24 names from a 3 KB file: walked path by path, the module (or dict) tree never ended."""
    from embscope.formats import _state_dict
    monkeypatch.setattr(_state_dict, "MAX_VISITS", 1000)  # the walk stops at the limit, whatever it is
    tree = (shared_twice(nn.Linear(2, 2), 24, module_twice) if whole
            else shared_twice({"w": torch.zeros(2)}, 24, lambda d: {"a": d, "b": d}))
    path = tmp_path / "shared.pt"
    torch.save(tree, path)
    assert path.stat().st_size < 20_000
    assert_error_line(invoke("info", "-c", path), "expected at most 1,000 values in the checkpoint, found more")


def test_a_module_shared_under_two_names_is_read_under_both(tmp_path):
    """T5's `shared` embedding is also encoder.embed_tokens and decoder.embed_tokens: state_dict() names all three."""
    model = module_twice(nn.Embedding(5, 3))
    path = tmp_path / "model.pt"
    torch.save(model, path)
    checkpoint = open_checkpoint(path)
    assert list(checkpoint.tensors) == list(model.state_dict()) == ["a.weight", "b.weight"]
    assert checkpoint.tensors["a.weight"].storage == checkpoint.tensors["b.weight"].storage


def test_a_class_where_a_module_belongs_is_named_as_a_class(tmp_path):
    model = nn.Sequential(nn.Linear(2, 2))
    model._modules["kind"] = nn.Linear  # the class, not a module
    path = tmp_path / "model.pt"
    torch.save(model, path)
    assert_error_line(invoke("info", "-c", path), "expected submodule 'kind' of the pickled model to be a module, "
                      "found the class 'torch.nn.modules.linear.Linear'")


@pytest.mark.parametrize("trust", [False, True], ids=["restricted", "trusted"])
def test_a_config_with_slots_is_read_as_its_attributes(tmp_path, trust):
    """dataclass(slots=True) pickles its state as (None, slots): refused, even with --trust-pickle, which before the
    whole-model reader imported the class and built it."""
    from embscope.formats import OpenOptions
    path = tmp_path / "ckpt.pt"
    torch.save({"model": tiny_model().state_dict(), "config": SlotsConfig(block_size=12)}, path)
    checkpoint = open_checkpoint(path, OpenOptions(trust_pickle=trust))
    assert checkpoint.config["block_size"] == 12


def test_protocol_1_spells_each_module_through_copyreg_reconstructor(tmp_path):
    """torch.save(model, pickle_protocol=1), which torch.load reads: each module is copyreg._reconstructor(cls, object,
    None) and BUILD, not NEWOBJ; it was refused. (Protocol 0 torch.load cannot read: its persistent ids are text.)"""
    model = tiny_model()
    path = tmp_path / "model.pt"
    torch.save(model, path, pickle_protocol=1)
    assert type(torch.load(path, weights_only=False)) is TinyGPT  # the reference reads it
    TinyGPT.restored.clear()
    checkpoint = open_checkpoint(path)
    assert list(checkpoint.tensors) == list(model.state_dict())
    assert np.array_equal(checkpoint.tensors["wpe.weight"].read(), model.wpe.weight.detach().numpy())
    assert TinyGPT.restored == []


def test_copyreg_reconstructor_over_another_base_is_still_refused(tmp_path):
    """_reconstructor(cls, base, state) with a base other than object calls base.__new__(cls, state): code."""
    body = (b"\x80\x02ccopyreg\n_reconstructor\nctest_whole_model\nTinyGPT\ncbuiltins\nint\nK\x05\x87R.")
    path = tmp_path / "model.pt"
    torch.save({}, path)
    import zipfile
    with zipfile.ZipFile(path) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w") as target:
        for info, data in members:
            target.writestr(info, body if info.filename.endswith("/data.pkl") else data)
    assert_error_line(invoke("info", "-c", path), "refused to unpickle global 'copyreg._reconstructor'")


def test_params_leaves_out_the_models_buffers_as_parameters_does(tmp_path):
    """BatchNorm's running statistics and a pruning mask are float buffers: in state_dict(), not in parameters()
    (the reference). They were counted: 784 for this model, torch's count 704 (the tied head once)."""
    from torch.nn.utils import prune
    model = tiny_model()
    model.norm = nn.BatchNorm1d(8)  # running_mean, running_var (float), num_batches_tracked (int)
    prune.l1_unstructured(model.h[0].fc, "weight", 0.5)  # weight_orig a parameter, weight_mask a buffer
    path = tmp_path / "model.pt"
    torch.save(model, path)
    doc = run_json("params", "-c", path, "--json")
    assert doc["total"] == sum(p.numel() for p in model.parameters()) == 704
    assert doc["total_source"].endswith("the pickled model's buffers left out")
    checkpoint = open_checkpoint(path)
    assert {"norm.running_mean", "h.0.fc.weight_mask"} <= set(checkpoint.tensors)  # still read: they are in the file
