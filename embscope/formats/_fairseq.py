"""fairseq's checkpoint layout inside a torch.save file: {"args": Namespace or None, "cfg": dict (omegaconf made
plain by fairseq before saving), "model": state dict, "optimizer_history": [...], "extra_state": {...}}
(fairseq/checkpoint_utils.py save_state, trainer.state_dict). What it says about the model is exposed where a
config.json's values are: model_type "fairseq", and pad_token_id, the padding index that fairseq's learned
positions start after (position p is row padding_idx + 1 + p, fairseq/utils.py make_positions)."""

from __future__ import annotations

from typing import Any

from ..storage.unpickle import Record

FAIRSEQ_MODEL_TYPE = "fairseq"
DEFAULT_PAD = 1  # fairseq's Dictionary puts <s> <pad> </s> <unk> at 0-3: pad is 1 unless the arguments say
CFG_SECTIONS = ("model", "task", "common")  # where a fairseq cfg (Hydra) keeps a setting, first found wins


def is_fairseq(top: dict[Any, Any]) -> bool:
    args, cfg = top.get("args"), top.get("cfg")
    namespace = isinstance(args, Record) and args.kind == "argparse.Namespace"
    return "model" in top and (namespace or isinstance(cfg, dict)) and (
        "optimizer_history" in top or "extra_state" in top or namespace)


def setting(top: dict[Any, Any], name: str) -> Any:
    """A training setting: args.<name> (older fairseq), else cfg.<section>.<name> (fairseq >= 0.10)."""
    args, cfg = top.get("args"), top.get("cfg")
    if isinstance(args, dict) and name in args:
        return args[name]
    for section in CFG_SECTIONS:
        part = cfg.get(section) if isinstance(cfg, dict) else None
        if isinstance(part, dict) and name in part:
            return part[name]
    return None


def whole(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def fairseq_config(top: dict[Any, Any]) -> dict[str, Any]:
    """The config values a fairseq checkpoint gives; empty for any other file."""
    if not is_fairseq(top):
        return {}
    pad = whole(setting(top, "pad"))
    config: dict[str, Any] = {"model_type": FAIRSEQ_MODEL_TYPE, "pad_token_id": DEFAULT_PAD if pad is None else pad}
    arch = setting(top, "arch") or setting(top, "_name")
    if isinstance(arch, str):
        config["fairseq_arch"] = arch
    task = fairseq_task(top)
    if task:
        config["fairseq_task"] = task
    kept, swapped = setting(top, "leave_unmasked_prob"), setting(top, "random_token_prob")
    if all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in (kept, swapped)):
        config["fairseq_unmasked_probs"] = (float(kept), float(swapped))  # a picked token left, or swapped
    positions = whole(setting(top, "max_positions")) or whole(setting(top, "max_source_positions"))
    if positions:
        config["max_positions"] = positions
    return config


def fairseq_task(top: dict[Any, Any]) -> str | None:
    """The task it was trained for: args.task (older fairseq), else cfg.task._name (fairseq >= 0.10)."""
    args, cfg = top.get("args"), top.get("cfg")
    task = args.get("task") if isinstance(args, dict) else None
    if task is None and isinstance(cfg, dict) and isinstance(cfg.get("task"), dict):
        task = cfg["task"].get("_name")
    return task if isinstance(task, str) else None


def fairseq_step(top: dict[Any, Any]) -> int | None:
    """The updates done when it was saved: optimizer_history[-1]["num_updates"]."""
    history = top.get("optimizer_history") if is_fairseq(top) else None
    last = history[-1] if isinstance(history, list) and history else None
    return whole(last.get("num_updates")) if isinstance(last, dict) else None
