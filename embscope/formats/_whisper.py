"""openai-whisper's checkpoint layout inside a torch.save file: {"dims": ModelDimensions as a dict, "model_state_dict":
state dict} (whisper/__init__.py load_model). Its TextDecoder keeps no output projection: its logits are
x @ token_embedding.weight.T (whisper/model.py), so the head is the token table, which this reader says."""

from __future__ import annotations

from typing import Any

TOKEN_TABLE = "decoder.token_embedding.weight"
DIMS_KEYS = ("n_vocab", "n_text_ctx", "n_text_state")  # ModelDimensions' text side


def whisper_head(top: dict[Any, Any], names: set[str]) -> tuple[bool | None, list[str]]:
    """(tied, notes): tied where the file is openai-whisper's layout, with the note that says why; else (None, [])."""
    dims = top.get("dims")
    if not (isinstance(dims, dict) and all(key in dims for key in DIMS_KEYS) and TOKEN_TABLE in names):
        return None, []
    note = ("openai-whisper checkpoint ('dims' beside 'model_state_dict'): its TextDecoder's logits are "
            f"x @ {TOKEN_TABLE}.T, so the head is the token table")
    return True, [note]
