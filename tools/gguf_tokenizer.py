"""Builds a Hugging Face `tokenizers` tokenizer from the tokenizer metadata of a llama.cpp GGUF file.

Handles the byte-level BPE ("gpt2") vocabularies: tokens, merges and token types come from the GGUF;
the pre-tokenizer follows llama.cpp's pre-tokenizer name (for "smollm", as for StarCoder: every digit
on its own, then the GPT-2 split regex), bytes map to printable characters GPT-2 style. Control tokens
(type 3) and user-defined tokens (type 4) become special added tokens, so they never split. Leaves out
SentencePiece ("llama") vocabularies, which SmolLM2 does not use.
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

# llama.cpp token types (llama_token_type).
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 2, 3, 4

# Pre-tokenizer names whose llama.cpp regex is "\p{N}" then the GPT-2 pattern.
_DIGIT_SPLIT_PRE = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"}
_GPT2_PRE = {"gpt2", "default", "gpt-2"}


def build_tokenizer(tokens: list[str], merges: list[str], token_types: list[int], pre: str) -> Tokenizer:
    """Returns a byte-level BPE tokenizer equivalent to the GGUF's tokenizer.ggml.* description."""
    if len(tokens) != len(token_types):
        raise ValueError(f"tokenizer.ggml.tokens has {len(tokens)} entries but token_type has {len(token_types)}")
    if len(set(tokens)) != len(tokens):
        raise ValueError("tokenizer.ggml.tokens contains duplicate token strings")
    vocab = {tok: i for i, tok in enumerate(tokens)}
    pairs = []
    for n, m in enumerate(merges):
        parts = m.split(" ")
        if len(parts) != 2:
            raise ValueError(f"tokenizer.ggml.merges[{n}] is not two space-separated symbols: {m!r}")
        pairs.append((parts[0], parts[1]))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if pre in _DIGIT_SPLIT_PRE:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif pre in _GPT2_PRE:
        tok.pre_tokenizer = byte_level
    else:
        raise ValueError(f"tokenizer.ggml.pre {pre!r} is not a pre-tokenizer this converter knows")
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    special = [AddedToken(t, special=True, normalized=False)
               for t, ty in zip(tokens, token_types) if ty in (TOKEN_CONTROL, TOKEN_USER_DEFINED)]
    tok.add_special_tokens(special)
    return tok
