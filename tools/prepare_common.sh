# Shell functions shared by prepare_model.sh and prepare_gemma3.sh (sourced; needs PY and log).

# older_than TARGET SOURCES...: true when TARGET is missing or any source is newer.
older_than() {
  local target="$1"; shift
  [ -e "$target" ] || return 0
  for s in "$@"; do [ "$s" -nt "$target" ] && return 0; done
  return 1
}

# convert_stale GGUF MODEL_DIR DRIVER: converts GGUF into MODEL_DIR when any output is missing or
# older than the GGUF, the converter code or the calling DRIVER script; sets rebuilt=1 when it did.
convert_stale() {
  local gguf="$1" model="$2" driver="$3"
  local sources=(tools/convert_gguf.py tools/gguf_quants.py tools/gguf_tokenizer.py "$driver" "$gguf")
  local out
  for out in model.safetensors config.json tokenizer.json; do
    if older_than "$model/$out" "${sources[@]}"; then
      log "converting $(basename "$gguf") -> $model"
      "$PY" tools/convert_gguf.py --gguf "$gguf" --out "$model"
      rebuilt=1
      return 0
    fi
  done
}
