"""Which row of a learned position table holds position 0, for the families whose position ids are offset.

RoBERTa and its kin count positions from padding_idx + 1 (transformers' create_position_ids_from_input_ids:
position p is row p + padding_idx + 1, the padding row and those below it never used); OPT's learned positional
embedding adds a fixed 2. The rule is one table, family -> how to get the offset, so a family is added in one line.
It was drawn up from transformers' own modelling code: every family that calls create_position_ids_from_input_ids,
adds an offset to its learned positions, or counts them from arange + 2, and the families whose tables carry OPT's
name but start at row 0 (the name alone says 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_PADDING_IDX = 1  # fairseq's Dictionary puts <pad> at 1, and RoBERTa-family configs say pad_token_id 1


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class OffsetRule:
    """How a family numbers its positions: a fixed offset, or padding_idx + 1 with padding_idx from `key`."""

    family: str  # the architectures, for people
    fixed: int | None = None  # the offset itself, when it does not depend on the padding id
    key: str = "pad_token_id"  # where padding_idx comes from: a config.json key, or checkpoint metadata
    why: str = ""  # what the fixed offset is, for people

    def offset(self, config: Mapping[str, Any]) -> tuple[int, str]:
        """The rows before position 0 and the rule, in words, that gave them."""
        if self.fixed is not None:
            return self.fixed, f"{self.family} {self.why or f'adds a fixed {self.fixed} to every position id'}"
        padding, said = config.get(self.key), f"{self.key} is {config.get(self.key)}"
        if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
            padding, said = DEFAULT_PADDING_IDX, f"padding_idx is {DEFAULT_PADDING_IDX}, the default, with no {self.key} given"
        return padding + 1, f"{self.family} counts positions from padding_idx + 1, and {said}"


# model_type (config.json) -> the rule; "fairseq" is a checkpoint whose reader gives fairseq's padding_idx in its
# metadata under "padding_idx" (fairseq checkpoints keep it in args/cfg), 1 when it does not say
OFFSET_RULES: dict[str, OffsetRule] = {
    "roberta": OffsetRule("RoBERTa"),
    "xlm-roberta": OffsetRule("XLM-RoBERTa"),
    "camembert": OffsetRule("CamemBERT"),
    "longformer": OffsetRule("Longformer"),
    # transformers' MPNetEmbeddings sets padding_idx = 1 whatever the config's pad_token_id
    "mpnet": OffsetRule("MPNet", fixed=2, why="counts positions from padding_idx + 1, its padding_idx fixed at 1"),
    "fairseq": OffsetRule("fairseq", key="padding_idx"),
    "opt": OffsetRule("OPT", fixed=2),
    # transformers' RoBERTa kin: their embeddings call create_position_ids_from_input_ids(ids, config.pad_token_id)
    "data2vec-text": OffsetRule("Data2VecText"),
    "ibert": OffsetRule("I-BERT"),
    "xmod": OffsetRule("X-MOD"),
    "roberta-prelayernorm": OffsetRule("RoBERTa-PreLayerNorm"),
    "xlm-roberta-xl": OffsetRule("XLM-RoBERTa-XL"),
    "esm": OffsetRule("ESM (absolute positions)"),
    "markuplm": OffsetRule("MarkupLM"),
    "luke": OffsetRule("LUKE"),
    "lilt": OffsetRule("LiLT"),
    "layoutlmv3": OffsetRule("LayoutLMv3"),
    # the text towers of composite models (config.json's text_config, tensors under 'text_model.')
    "clap_text_model": OffsetRule("CLAP's text model"),
    "altclip_text_model": OffsetRule("AltCLIP's text model"),
    "bridgetower_text_model": OffsetRule("BridgeTower's text model"),
    # position ids arange(max_position_embeddings) + 2, the table 2 rows longer, whatever the padding id
    "trocr": OffsetRule("TrOCR", fixed=2),
    "mra": OffsetRule("MRA", fixed=2),
    "nystromformer": OffsetRule("Nystromformer", fixed=2),
    "yoso": OffsetRule("YOSO", fixed=2),
    # position p is row p, though the table is named 'embed_positions' as OPT's and fairseq's are (offset by 2)
    **{family: OffsetRule(name, fixed=0, why="numbers positions from row 0, whatever its table's name")
       for family, name in (("blenderbot", "Blenderbot"), ("blenderbot-small", "BlenderbotSmall"), ("led", "LED"),
                            ("bigbird_pegasus", "BigBirdPegasus"), ("marian", "Marian"), ("pegasus", "Pegasus"),
                            ("pegasus_x", "PEGASUS-X"), ("whisper", "Whisper"))},
    # BART's learned positions (and its kin's) add a fixed offset of 2 to every position id
    "bart": OffsetRule("BART", fixed=2),
    "mbart": OffsetRule("mBART", fixed=2),
    "plbart": OffsetRule("PLBart", fixed=2),
    "mvp": OffsetRule("MVP", fixed=2),
    "biogpt": OffsetRule("BioGPT", fixed=2),
}


# a family's tables other than the word positions' that its position ids index (LiLT adds the box positions'
# row for the same id); a family's other tables count from row 0 (LUKE's entity positions, LayoutLMv3's x)
SAME_POSITION_IDS = {"lilt": ("box_position_embeddings.weight",)}
TEXT_TOWER = "text_model"  # where a composite model (CLAP, AltCLIP, BridgeTower) keeps its text tower's tensors


def position_offset(config: Mapping[str, Any], tensor_name: str = "") -> tuple[int, str] | None:
    """The rows before position 0 by the config's model_type, with the rule that says so; None for a family whose
    position p is row p (or a config that names no family). A composite model's config names its text tower's
    family in text_config, which numbers the tables under 'text_model.' only (a vision tower's count from row 0)."""
    found = family_offset(config, "the config")
    text = config.get("text_config")
    if found is None and isinstance(text, Mapping) and TEXT_TOWER in tensor_name.split("."):
        found = family_offset(text, "the config's text_config")
    return found


def indexed_by_position_ids(config: Mapping[str, Any], tensor_name: str) -> bool:
    """Whether the family's position ids index this table too, as they index its word positions'."""
    model_type = config.get("model_type")
    names = SAME_POSITION_IDS.get(model_type, ()) if isinstance(model_type, str) else ()
    return any(tensor_name == name or tensor_name.endswith("." + name) for name in names)


def family_offset(config: Mapping[str, Any], where: str) -> tuple[int, str] | None:
    model_type = config.get("model_type")
    rule = OFFSET_RULES.get(model_type) if isinstance(model_type, str) else None
    if rule is None:
        return None
    first_row, why = rule.offset(config)
    row = f"row p+{first_row}" if first_row else "row p"
    return first_row, f"position p is {row}: {why}; model_type {model_type!r} in {where}"
