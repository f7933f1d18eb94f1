#!/usr/bin/env python3
"""Tokenises KVZip's "repeat the previous context" prompt for one model folder.

KVZip scores a prefilled context by feeding a repeat prompt and the context again, teacher-forced, on
top of the context's cache. The C++ backend has no tokenizer, so this writes the prompt's token ids
once, next to the model: <model folder>/kvzip_prompt.json = {"text": "...", "ids": [...]} (written
to a temporary name and renamed); backend/kvzip_prompt.cpp reads it (`kvshift proxykv dataset`).

The wording is the first chunk's prompt of the official KVZip code (snu-mllab/KVzip,
model/wrapper.py, ModelKVzip.self_task): "\\n\\nRepeat the previous context exactly." There KVZip
appends the chat template's assistant prefix before the repeated context; our contexts are raw text
(no chat template), so a single "\\n" stands in for it. The KVZip paper paraphrases the same
prompt as "Repeat the previous context:". Ids are encoded without special tokens.

Usage: tokenize_prompt.py --model models/smollm2-135m [--text "..."]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tokenizers import Tokenizer

KVZIP_PROMPT = "\n\nRepeat the previous context exactly.\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model folder holding tokenizer.json")
    ap.add_argument("--text", default=KVZIP_PROMPT, help="prompt text (default: KVZip's wording)")
    args = ap.parse_args()
    folder = Path(args.model)
    tok_path = folder / "tokenizer.json"
    if not tok_path.is_file():
        print(f"tokenize_prompt: error: {tok_path} not found", file=sys.stderr)
        return 2
    tokenizer = Tokenizer.from_file(str(tok_path))
    ids = tokenizer.encode(args.text, add_special_tokens=False).ids
    if not ids:
        print("tokenize_prompt: error: the prompt encodes to no tokens", file=sys.stderr)
        return 2
    doc = {"text": args.text, "ids": [int(i) for i in ids]}
    out = folder / "kvzip_prompt.json"
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(doc, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    print(f"tokenize_prompt: wrote {out} ({len(ids)} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
