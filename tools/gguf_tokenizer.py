"""Builds a Hugging Face `tokenizers` tokenizer from the tokenizer metadata of a llama.cpp GGUF file.

Handles the byte-level BPE ("gpt2") vocabularies: tokens, merges and token types come from the GGUF;
the pre-tokenizer follows llama.cpp's pre-tokenizer name (for "smollm", as for StarCoder: every digit
on its own, then the GPT-2 split regex), bytes map to printable characters GPT-2 style. Control tokens
(type 3) and user-defined tokens (type 4) become special added tokens, so they never split.

And SentencePiece BPE ("llama") vocabularies such as Gemma 3's, which have scores instead of merges:
SentencePiece merges the adjacent pair whose joined piece scores highest, so the merges are every split
of a normal piece into two pieces of the vocabulary, ranked by the joined piece's score (what Hugging
Face's own SentencePiece converter does). Spaces become "▁" (no dummy prefix when the GGUF says
add_space_prefix false), characters outside the vocabulary fall back to their UTF-8 bytes (<0xNN>).
Leaves out SentencePiece unigram vocabularies.
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

# llama.cpp token types (llama_token_type).
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6

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


def spm_merges(tokens: list[str], scores: list[float], token_types: list[int]) -> list[tuple[str, str]]:
    """The BPE merges equivalent to SentencePiece's score order: each split (left, right) of a normal
    piece into two vocabulary pieces, highest-scoring joined piece first (ties: shorter left first)."""
    vocab = {tok: i for i, tok in enumerate(tokens)}
    ranked = []
    for i, (piece, ty) in enumerate(zip(tokens, token_types)):
        if ty != TOKEN_NORMAL or len(piece) < 2:
            continue
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        ranked.extend((-scores[i], i, len(lr[0]), len(lr[1]), lr) for lr in local)
    ranked.sort(key=lambda r: r[:4])
    return [r[4] for r in ranked]


def build_spm_tokenizer(tokens: list[str], scores: list[float], token_types: list[int], unk_id: int,
                        add_space_prefix: bool) -> Tokenizer:
    """Returns a BPE tokenizer equivalent to a GGUF's SentencePiece BPE ("llama") description."""
    if not (len(tokens) == len(scores) == len(token_types)):
        raise ValueError(f"tokenizer.ggml.tokens, scores and token_type differ in length "
                         f"({len(tokens)}, {len(scores)}, {len(token_types)})")
    if len(set(tokens)) != len(tokens):
        raise ValueError("tokenizer.ggml.tokens contains duplicate token strings")
    if not 0 <= unk_id < len(tokens):
        raise ValueError(f"tokenizer.ggml.unknown_token_id {unk_id} is outside the vocabulary")
    vocab = {tok: i for i, tok in enumerate(tokens)}
    model = models.BPE(vocab=vocab, merges=spm_merges(tokens, scores, token_types), unk_token=tokens[unk_id],
                       fuse_unk=True, byte_fallback=True)
    tok = Tokenizer(model)
    steps = [normalizers.Prepend("▁")] if add_space_prefix else []
    tok.normalizer = normalizers.Sequence(steps + [normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
                                    + ([decoders.Strip(" ", 1, 0)] if add_space_prefix else []))
    special = [AddedToken(t, special=ty == TOKEN_CONTROL, normalized=False)
               for t, ty in zip(tokens, token_types) if ty in (TOKEN_CONTROL, TOKEN_USER_DEFINED)]
    tok.add_special_tokens([a for a in special if a.special])
    tok.add_tokens([a for a in special if not a.special])
    return tok
