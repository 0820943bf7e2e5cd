"""The vocabulary every layer of embscope shares, at the bottom of the house: the roles a table plays, the
catalogue a reader produces (Checkpoint, TensorInfo, Table, EmbeddingTables), the errors, the tokenizer interface,
and every read of a file (files, memory). Imports nothing of embscope above it."""
