"""Tokenizers (being written on the `tokenizers` branch; this interim version finds none)."""


def find_tokenizer(directory):
    return None


def load_tokenizer(path):
    from ..errors import EmbscopeError
    raise EmbscopeError(f"tokenizers are not supported yet: {path}")
