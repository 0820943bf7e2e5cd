"""What the format readers and the tokenizer kinds share to decode stored bytes: the constants of file layouts,
the checks of a header's claims, the tensor descriptors, and the restricted unpickler. Beneath both, so that a
tokenizer (nanoGPT's meta.pkl) unpickles without importing a reader."""
