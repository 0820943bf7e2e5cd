"""What `--help` says of each command beyond its docstring: the one line `embscope --help` lists (short enough to
be shown whole, never cut with "..."), and one to three examples as a user types them, which end the command's own
`-h` page. Every example's first word is the command; tests/test_commands.py runs each one that names no file
missing from the repository."""

from __future__ import annotations

from typing import Any

SHORT_HELP = {
    "info": "Format, tables found and why, tokenizer, tensors.",
    "similarity": "Cosine between the rows of words or ids.",
    "neighbors": "The rows nearest a word, or to every row (--all).",
    "positions": "Cosine between learned position rows.",
    "norms": "Row norms, anomalies, near-duplicate rows.",
    "params": "Parameters in the embedding tables.",
    "undertrained": "Under-trained token candidates.",
    "compare": "What changed between checkpoints.",
    "geometry": "Mean cosine, spectrum, isotropy of a table.",
    "analogy": "Word analogies: the rows nearest A - B + C.",
    "map": "A 2-D map of a table (PCA), with probe words.",
    "export": "Write a table for the TF projector or word2vec.",
    "report": "Every answer in one HTML page or Markdown folder.",
}

EXAMPLES = {
    "info": ("embscope info", "embscope info -c sample_checkpoints/hf", "embscope info -c gpt2 --json"),
    "similarity": ("embscope similarity dog cat", "embscope similarity father mother the",
                   "embscope similarity --ids 10 20"),
    "neighbors": ("embscope neighbors father -k 5", "embscope neighbors --all --out neighbors.tsv"),
    "positions": ("embscope positions --pairs", "embscope positions --profile"),
    "norms": ("embscope norms --plot", "embscope norms --table token --json"),
    "params": ("embscope params", "embscope params -c sample_checkpoints/hf --json"),
    "undertrained": ("embscope undertrained", "embscope undertrained --plot"),
    "compare": ("embscope compare sample_checkpoints/nlm sample_checkpoints/nlm_step1000 --sample 0",
                "embscope compare run-a/ckpt.pt run-b/ckpt.pt --align procrustes",
                "embscope compare --output -c sample_checkpoints/nanogpt/ckpt.pt"),
    "geometry": ("embscope geometry", "embscope geometry --table position --top 3"),
    "analogy": ("embscope analogy father man woman -k 5",),
    "map": ("embscope map", "embscope map --table position --plot"),
    "export": ("embscope export --out projector", "embscope export --format word2vec --out vectors.txt"),
    "report": ("embscope report", "embscope report --format md --out report"),
}

ROOT_HELP = ("Look inside the token and position embedding tables of a language-model checkpoint.\n\n"
             "Every command reads the checkpoint -c names: a file, a folder, or a model id in the local Hugging Face "
             "cache (-c gpt2). Without -c: $EMBSCOPE_CHECKPOINT, else the bundled sample model.")
ROOT_EXAMPLES = ("embscope info", "embscope similarity dog cat -c path/to/model.safetensors", "embscope norms -h")


def epilog(examples: tuple[str, ...]) -> str:
    """The examples as a block click prints as it is (\\b: no rewrapping)."""
    return "\b\nExamples:\n" + "\n".join(f"  {example}" for example in examples)


def describe(command: Any, name: str) -> None:
    """Give a registered command (typer's CommandInfo) its line in the list and its examples."""
    command.short_help = SHORT_HELP[name]
    command.epilog = epilog(EXAMPLES[name])
