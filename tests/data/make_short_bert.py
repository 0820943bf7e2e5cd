"""Writes tests/data/short_bert/: a tiny BERT (transformers' BertForMaskedLM, 128 positions, hidden size 64)
trained with masked-LM for 300 steps on sequences of at most 40 tokens, so positions 40-127 keep the values
save_pretrained's initialisation gave them (N(0, 0.02)). Run from the repository root:
    python tests/data/make_short_bert.py
"""

from pathlib import Path

import torch
import transformers

OUT = Path(__file__).parent / "short_bert"
SEQUENCE = 40
STEPS = 300


def main() -> None:
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=96, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=128, initializer_range=0.02)
    model = transformers.BertForMaskedLM(config)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(STEPS):
        length = int(torch.randint(8, SEQUENCE + 1, ()))
        # a toy language: each sequence counts up from a random start, so positions and tokens both matter
        start = torch.randint(5, 50, (16, 1))
        ids = (start + torch.arange(length)) % 91 + 5
        labels = ids.clone()
        masked = torch.rand(ids.shape) < 0.15
        labels[~masked] = -100
        inputs = ids.masked_fill(masked, 4)  # 4: the [MASK] of this toy vocabulary
        loss = model(input_ids=inputs, labels=labels).loss
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    model.save_pretrained(OUT)
    print(f"final loss {loss.item():.3f}; wrote {OUT}")


if __name__ == "__main__":
    main()
