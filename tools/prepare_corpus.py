#!/usr/bin/env python3
"""Turns public-domain English prose shipped by a Debian package into a token-id corpus.

Source "kjv" (the default corpus): the King James Version of the Bible (1611; public domain — in the
UK the text is under Crown letters patent), as shipped by Debian's `bible-kjv-text` and read out with
its `bible` program (package `bible-kjv`): all 66 books, 1,189 chapters. Each chapter becomes "Book N"
followed by one paragraph of its verses (verse numbers dropped).
Source "jargon" (optional, modern English): the Jargon File 4.4.7 (public domain), Debian's
`jargon-text`: the introduction chapters, every lexicon entry and the appendices, with the plain-text
line wrapping undone, cross-reference braces removed, and tables/ASCII art and the glossary index
(a bare word list) dropped.
The whole text is tokenised in one call with the converted tokenizer.json and written as
data/corpus/<name>.tokens (little-endian int32 ids, one stream) plus data/corpus/<name>.json (source,
licence, package version, counts, sha256 of the text and of the tokenizer). Both files are written to
temporary names and renamed. Leaves out any other normalisation: the prose is scored as printed.

Usage: prepare_corpus.py --tokenizer models/smollm2-135m/tokenizer.json --out data/corpus [--name kjv|jargon]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

SOURCES = {
    "kjv": {
        "title": "The Holy Bible, King James Version (1611 text as distributed by Debian)",
        "package": "bible-kjv-text",
        "reader": "bible-kjv (its `bible` program prints the verses)",
        "licence": "Public domain (translation of 1611, copyright expired; in the United Kingdom the "
                   "Authorized Version is under Crown letters patent). Debian copyright file: "
                   "/usr/share/doc/bible-kjv-text/copyright",
    },
    "jargon": {
        "title": "The Jargon File, version 4.4.7 (Eric S. Raymond, ed.), as distributed by Debian",
        "package": "jargon-text",
        "reader": "jargon-text (/usr/share/doc/jargon-text/jargon.txt.gz)",
        "licence": "Public domain (\"This document (the Jargon File) is in the public domain, to be freely "
                   "used, shared, and modified\"). Debian copyright file: /usr/share/doc/jargon-text/copyright",
    },
}
JARGON_FILE = Path("/usr/share/doc/jargon-text/jargon.txt.gz")
_BOX = re.compile("[\u2500-\u257f]")
_ENTRY = re.compile(r"^   :.+:")

_VERSE = re.compile(r"^\s+\d+\s(.*)$")


def kjv_text() -> str:
    """Reads every verse through the `bible` program and rebuilds chapters as paragraphs."""
    exe = shutil.which("bible")
    if exe is None:
        raise RuntimeError("the `bible` program is missing: install the Debian packages bible-kjv and "
                           "bible-kjv-text (scripts/install-deps.sh does)")
    out = subprocess.run([exe, "-l", "1000000", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True, encoding="utf-8").stdout
    chapters, heading, verses = [], None, []
    for line in out.splitlines():
        if not line.strip():
            continue
        m = _VERSE.match(line)
        if m:
            verses.append(m.group(1).strip())
        else:
            if heading is not None:
                chapters.append(f"{heading}\n\n{' '.join(verses)}")
            heading, verses = line.strip(), []
    if heading is not None:
        chapters.append(f"{heading}\n\n{' '.join(verses)}")
    if len(chapters) != 1189:
        raise RuntimeError(f"expected 1189 chapters from `bible`, got {len(chapters)}")
    return "\n\n".join(chapters) + "\n"


def jargon_text() -> str:
    """The Jargon File as paragraphs: introduction, lexicon entries, appendices; no index or tables."""
    if not JARGON_FILE.is_file():
        raise RuntimeError(f"{JARGON_FILE} is missing: install the Debian package jargon-text")
    lines = gzip.decompress(JARGON_FILE.read_bytes()).decode("utf-8").splitlines()
    welcome = [i for i, ln in enumerate(lines) if ln.strip() == "Welcome to the Jargon File"]
    index = next(i for i, ln in enumerate(lines) if ln == "Glossary")  # the unindented index heading
    entries = next(i for i, ln in enumerate(lines) if i > index and _ENTRY.match(ln))
    kept = lines[welcome[-1]:index] + [""] + lines[entries:]
    paragraphs, cur = [], []
    for ln in kept + [""]:
        if ln.strip():
            cur.append(ln.strip())
            continue
        if cur and not any(_BOX.search(x) for x in cur):
            para = re.sub(r"[{}]", "", " ".join(cur))
            paragraphs.append(para[1:] if _ENTRY.match("   " + para) else para)
        cur = []
    return "\n\n".join(paragraphs) + "\n"


def package_version(pkg: str) -> str:
    """Installed Debian package version, or 'unknown'."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "unknown"


def write_atomic(path: Path, data: bytes) -> None:
    """Writes data to path through a temporary name in the same folder, then renames."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    tmp.write_bytes(data)
    tmp.replace(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, type=Path, help="tokenizer.json of the converted model")
    ap.add_argument("--out", required=True, type=Path, help="output folder (data/corpus)")
    ap.add_argument("--name", default="kjv", choices=sorted(SOURCES))
    args = ap.parse_args()
    if not args.tokenizer.is_file():
        print(f"prepare_corpus: error: --tokenizer: {args.tokenizer} does not exist", file=sys.stderr)
        return 2
    try:
        text = {"kjv": kjv_text, "jargon": jargon_text}[args.name]()
    except (RuntimeError, StopIteration, subprocess.CalledProcessError) as e:
        print(f"prepare_corpus: error: {e}", file=sys.stderr)
        return 2
    tok_bytes = args.tokenizer.read_bytes()
    tok = Tokenizer.from_str(tok_bytes.decode("utf-8"))
    ids = np.asarray(tok.encode(text, add_special_tokens=False).ids, dtype="<i4")
    if tok.decode(ids.tolist(), skip_special_tokens=False) != text:
        print("prepare_corpus: error: tokenizer round trip does not reproduce the text", file=sys.stderr)
        return 1
    src = SOURCES[args.name]
    meta = {
        "name": args.name,
        "source": src["title"],
        "debian_package": f"{src['package']} {package_version(src['package'])}",
        "read_with": src["reader"],
        "licence": src["licence"],
        "format": "little-endian int32 token ids, one stream, no BOS/EOS inserted",
        "tokens": int(len(ids)),
        "characters": len(text),
        "words": len(text.split()),
        "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "tokenizer": str(args.tokenizer),
        "tokenizer_sha256": hashlib.sha256(tok_bytes).hexdigest(),
        "vocab_size": tok.get_vocab_size(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / f"{args.name}.tokens", ids.tobytes())
    write_atomic(args.out / f"{args.name}.json", (json.dumps(meta, indent=2) + "\n").encode())
    print(f"prepare_corpus: wrote {args.out / (args.name + '.tokens')} ({len(ids):,} tokens, "
          f"{meta['words']:,} words)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
