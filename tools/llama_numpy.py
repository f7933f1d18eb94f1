"""The numpy Llama forward pass over a Hugging Face-style folder (config.json + safetensors).

What it models: token embedding, per layer RMSNorm -> grouped-query attention with half-split RoPE
(HF `rotate_half`: pairs (i, i + d/2)), optional q/k/v biases (Qwen2) and a causal mask -> residual ->
RMSNorm -> SwiGLU MLP -> residual, final RMSNorm and the (tied or separate) LM head; next-token NLL
in float64 log-softmax. Gemma 3 (model_type gemma3_text) too: embeddings scaled by sqrt(hidden), RMSNorm
as x·(1 + w), per-head RMSNorm of queries and keys before RoPE, norms after attention and after the MLP
as well as before, GELU (tanh) instead of SiLU, scores scaled by query_pre_attn_scalar^-1/2, and on its
sliding layers a window of `sliding_window` keys (query i sees keys i - window < j <= i) and RoPE base
rope_local_base_freq. Matmuls in float32 (or float64 when asked: the test fixtures' references),
one window at a time, no KV cache (teacher-forced scoring only). It is the one reference the C++
backends are checked against (reference_forward.py, selfcheck.py, tiny_llama/make_fixture.py), so it
is written to be obviously right, not fast. Reads F32, F16 and BF16 tensors, one file or shards with
model.safetensors.index.json. Leaves out rope scaling, logit soft-capping and batching of unequal lengths.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_STORED = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of one safetensors file as float32 (bf16 widened exactly), mapped, not read whole."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    (n,) = struct.unpack("<Q", raw[:8].tobytes())
    header = json.loads(raw[8:8 + n].tobytes())
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] not in _STORED:
            raise ValueError(f"{path}: tensor {name}: dtype {t['dtype']} is not F32, F16 or BF16")
        a, b = t["data_offsets"]
        values = raw[8 + n + a:8 + n + b].view(_STORED[t["dtype"]])
        if t["dtype"] == "BF16":
            values = (values.astype(np.uint32) << 16).view(np.float32)
        out[name] = values.astype(np.float32).reshape(t["shape"])
    return out


def read_weights(folder: Path) -> dict[str, np.ndarray]:
    """model.safetensors, or every shard model.safetensors.index.json names."""
    index = folder / "model.safetensors.index.json"
    if not index.exists():
        return read_safetensors(folder / "model.safetensors")
    w = {}
    for shard in sorted(set(json.loads(index.read_text())["weight_map"].values())):
        w.update(read_safetensors(folder / shard))
    return w


@dataclass
class LlamaConfig:
    """The config.json fields the forward pass needs."""
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    eps: float
    theta: float
    tied: bool
    gemma: bool = False
    sliding_window: int = 0
    sliding: tuple = ()         # per layer: uses the sliding window (Gemma 3)
    local_theta: float = 10000.0
    query_scalar: float = 0.0   # scores scaled by query_scalar^-1/2 (0: head_dim)

    @staticmethod
    def load(path: Path) -> "LlamaConfig":
        """Reads config.json, naming the missing field on error."""
        c = json.loads(Path(path).read_text())
        try:
            heads = int(c["num_attention_heads"])
            gemma = c.get("model_type") == "gemma3_text"
            layers = int(c["num_hidden_layers"])
            sliding = tuple(t == "sliding_attention" for t in c["layer_types"]) if gemma else ()
            if gemma and len(sliding) != layers:
                raise ValueError(f"{path}: layer_types has {len(sliding)} entries for {layers} layers")
            extra = dict(gemma=True, sliding_window=int(c["sliding_window"]), sliding=sliding,
                         local_theta=float(c["rope_local_base_freq"]),
                         query_scalar=float(c["query_pre_attn_scalar"])) if gemma else {}
            return LlamaConfig(hidden=int(c["hidden_size"]), layers=int(c["num_hidden_layers"]), heads=heads,
                               kv_heads=int(c.get("num_key_value_heads", heads)),
                               head_dim=int(c.get("head_dim", int(c["hidden_size"]) // heads)),
                               intermediate=int(c["intermediate_size"]), vocab=int(c["vocab_size"]),
                               eps=float(c["rms_norm_eps"]), theta=float(c.get("rope_theta", 10000.0)),
                               tied=bool(c.get("tie_word_embeddings", False)), **extra)
        except KeyError as e:
            raise ValueError(f"{path}: missing field {e.args[0]!r}") from None


class LlamaModel:
    """Weights of one model folder plus the forward pass."""

    def __init__(self, folder: Path, gguf_qk_order: bool = False, adjacent_rope: bool = False,
                 dtype=np.float32):
        """Loads the model; gguf_qk_order=True re-permutes Q/K rows to llama.cpp order (the wrong
        layout for half-split RoPE), to show what a missed un-permutation does; adjacent_rope=True
        rotates pairs (2i, 2i + 1) as llama.cpp does (right only together with gguf_qk_order);
        dtype: of the weights and every activation (float64 for exact references)."""
        folder = Path(folder)
        self.adjacent_rope = adjacent_rope
        self.dtype = np.dtype(dtype)
        self.cfg = LlamaConfig.load(folder / "config.json")
        self.w = read_weights(folder)
        if gguf_qk_order:
            from gguf_quants import permute_for_gguf
            for i in range(self.cfg.layers):
                p = f"model.layers.{i}.self_attn."
                self.w[p + "q_proj.weight"] = permute_for_gguf(self.w[p + "q_proj.weight"], self.cfg.heads)
                self.w[p + "k_proj.weight"] = permute_for_gguf(self.w[p + "k_proj.weight"], self.cfg.kv_heads)
        self.w = {k: v.astype(self.dtype, copy=False) for k, v in self.w.items()}
        self.head = self.w["model.embed_tokens.weight"] if self.cfg.tied else self.w["lm_head.weight"]

    def rope_tables(self, n: int, theta: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """cos/sin [n, head_dim] for positions 0..n-1, HF layout (frequencies repeated for both halves)."""
        d = self.cfg.head_dim
        theta = self.cfg.theta if theta is None else theta
        inv = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
        ang = np.outer(np.arange(n, dtype=np.float64), inv)
        ang = np.concatenate([ang, ang], axis=1)
        return np.cos(ang).astype(self.dtype), np.sin(ang).astype(self.dtype)

    def rms_norm(self, x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """x * rsqrt(mean(x^2) + eps) * weight (Gemma: * (1 + weight)), per row."""
        var = np.mean(x.astype(self.dtype) ** 2, axis=-1, keepdims=True)
        return (x / np.sqrt(var + self.cfg.eps)) * (1 + weight if self.cfg.gemma else weight)

    def apply_rope(self, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """Half-split rotation x * cos + rotate_half(x) * sin (or adjacent pairs), x [heads, n, head_dim]."""
        half = x.shape[-1] // 2
        if self.adjacent_rope:
            c, s = cos[:, :half], sin[:, :half]
            even, odd = x[..., 0::2], x[..., 1::2]
            return np.stack([even * c - odd * s, even * s + odd * c], axis=-1).reshape(x.shape)
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rot * sin

    def attention(self, i: int, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """One layer's causal GQA attention output (after o_proj), x [n, hidden] already normalised."""
        c, p = self.cfg, f"model.layers.{i}.self_attn."
        n = x.shape[0]
        def proj(name: str, heads: int) -> np.ndarray:
            y = x @ self.w[p + name + ".weight"].T
            if p + name + ".bias" in self.w:
                y = y + self.w[p + name + ".bias"]
            return y.reshape(n, heads, c.head_dim).transpose(1, 0, 2)

        q, k, v = proj("q_proj", c.heads), proj("k_proj", c.kv_heads), proj("v_proj", c.kv_heads)
        if c.gemma:
            q, k = self.rms_norm(q, self.w[p + "q_norm.weight"]), self.rms_norm(k, self.w[p + "k_norm.weight"])
        q, k = self.apply_rope(q, cos, sin), self.apply_rope(k, cos, sin)
        group = c.heads // c.kv_heads
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)  # [heads, n, head_dim]
        scores = (q @ k.transpose(0, 2, 1)) / self.dtype.type(np.sqrt(c.query_scalar or c.head_dim))
        scores = scores + np.triu(np.full((n, n), -np.inf, dtype=self.dtype), k=1)
        if c.gemma and c.sliding[i]:  # key j leaves query i's window once i - j >= window
            scores = scores + np.tril(np.full((n, n), -np.inf, dtype=self.dtype), k=-c.sliding_window)
        scores = scores - scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        out = (probs @ v).transpose(1, 0, 2).reshape(n, c.heads * c.head_dim)
        return out @ self.w[p + "o_proj.weight"].T

    def mlp(self, i: int, x: np.ndarray) -> np.ndarray:
        """SwiGLU: down(silu(gate(x)) * up(x)); Gemma: GELU (tanh approximation) instead of SiLU."""
        p = f"model.layers.{i}.mlp."
        g = x @ self.w[p + "gate_proj.weight"].T
        u = x @ self.w[p + "up_proj.weight"].T
        if self.cfg.gemma:
            act = 0.5 * g * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (g + 0.044715 * g ** 3)))
        else:
            act = g / (1.0 + np.exp(-g))
        return (act.astype(self.dtype) * u) @ self.w[p + "down_proj.weight"].T

    def logits(self, ids: np.ndarray) -> np.ndarray:
        """Logits [n, vocab] for one window of token ids (positions start at 0)."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.min() < 0 or ids.max() >= self.cfg.vocab:
            raise ValueError(f"token id out of range 0..{self.cfg.vocab - 1}")
        c = self.cfg
        cos, sin = self.rope_tables(len(ids))
        local = self.rope_tables(len(ids), c.local_theta) if c.gemma else None
        h = self.w["model.embed_tokens.weight"][ids]
        if c.gemma:
            h = h * self.dtype.type(np.sqrt(c.hidden))
        for i in range(c.layers):
            p = f"model.layers.{i}."
            if not c.gemma:
                h = h + self.attention(i, self.rms_norm(h, self.w[p + "input_layernorm.weight"]), cos, sin)
                h = h + self.mlp(i, self.rms_norm(h, self.w[p + "post_attention_layernorm.weight"]))
                continue
            a = self.attention(i, self.rms_norm(h, self.w[p + "input_layernorm.weight"]),
                               *(local if c.sliding[i] else (cos, sin)))
            h = h + self.rms_norm(a, self.w[p + "post_attention_layernorm.weight"])
            m = self.mlp(i, self.rms_norm(h, self.w[p + "pre_feedforward_layernorm.weight"]))
            h = h + self.rms_norm(m, self.w[p + "post_feedforward_layernorm.weight"])
        return self.rms_norm(h, self.w["model.norm.weight"]) @ self.head.T

    def token_nll(self, ids: np.ndarray) -> np.ndarray:
        """Per-position NLL (nats) of ids[1:] given the prefix: length len(ids) - 1, float64."""
        z = self.logits(ids[:-1]).astype(np.float64)
        m = z.max(axis=-1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=-1))
        return lse - z[np.arange(len(ids) - 1), np.asarray(ids[1:], dtype=np.int64)]
