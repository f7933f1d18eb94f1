#!/usr/bin/python3
"""HybridAxialMapper (ProxyKV) in PyTorch, a mirror of backend/proxy_mapper.cpp.

Parameter names are the C++ tensor names, so `state_dict()` keys are exactly
the safetensors names the C++ loader reads. Also here: a minimal safetensors
reader/writer (F32 and I64 only, no dependency on the `safetensors` package)
and the reader of `kvshift proxykv dataset` folders.

Leaves out: training (train_mapper.py) and any feature transform (the dataset's
features are consumed as they are, exactly as the C++ forward consumes them).
Needs Debian's PyTorch: run with /usr/bin/python3.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

MAPPER_FORMAT = "kvshift-proxykv-mapper"
DATASET_FORMAT = "kvshift-proxykv-dataset"
ARCH_FIELDS = ("in_channels", "targets", "width", "layers", "heads", "ffn", "kernel", "window")


class InputError(Exception):
    """Bad input from the user (flag or file); the CLI maps it to exit code 2."""


# ---------------------------------------------------------------- safetensors

_DTYPES = {"F32": np.dtype("<f4"), "I64": np.dtype("<i8")}


def write_safetensors(path, tensors):
    """Writes {name: array} (float32 or int64) atomically: a tmp file, then rename."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        dtype = "I64" if a.dtype.kind in "iu" else "F32"
        raw = np.ascontiguousarray(a, dtype=_DTYPES[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keeps the data section 8-byte aligned
    tmp = path + ".tmp.%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


def read_safetensors(path):
    """{name: numpy array} of a safetensors file; InputError names the file and tensor."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise InputError("%s: cannot read (%s)" % (path, e.strerror))
    if len(blob) < 8:
        raise InputError("%s: not a safetensors file (%d bytes)" % (path, len(blob)))
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise InputError("%s: header length %d runs past the file end" % (path, n))
    try:
        header = json.loads(blob[8:8 + n])
    except ValueError as e:
        raise InputError("%s: header is not JSON (%s)" % (path, e))
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise InputError("%s: tensor %r has dtype %r (only F32 and I64 are read)"
                             % (path, name, info.get("dtype")))
        shape = tuple(info["shape"])
        a, b = info["data_offsets"]
        if not 0 <= a <= b <= len(data) or b - a != dtype.itemsize * math.prod(shape):
            raise InputError("%s: tensor %r: data_offsets %s do not fit shape %s"
                             % (path, name, [a, b], list(shape)))
        out[name] = np.frombuffer(data[a:b], dtype=dtype).reshape(shape)
    return out


# ---------------------------------------------------------------- the model

def sinusoidal_positions(T, width):
    """pe[t, i] = sin(t / 10000^(i/width)) for even i, cos(same angle) at i + 1."""
    t = torch.arange(T, dtype=torch.float64)[:, None]
    i = torch.arange(0, width, 2, dtype=torch.float64)[None, :]
    angle = t / torch.pow(10000.0, i / width)
    pe = torch.zeros(T, width, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)[:, : width // 2]
    return pe.float()


class Attention(nn.Module):
    """Multi-head self-attention over time, keys limited to |i − j| ≤ window/2."""

    def __init__(self, width, heads, window):
        super().__init__()
        self.heads, self.radius = heads, window // 2
        self.q, self.k, self.v, self.o = (nn.Linear(width, width) for _ in range(4))

    def forward(self, a):  # a [B, T, W]
        B, T, W = a.shape
        dh = W // self.heads
        wqkv = torch.cat([self.q.weight, self.k.weight, self.v.weight])
        bqkv = torch.cat([self.q.bias, self.k.bias, self.v.bias])
        qkv = dense(a, wqkv, bqkv).reshape(B, T, 3, self.heads, dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0] / math.sqrt(dh), qkv[1], qkv[2]  # [B, H, T, dh]
        block = max(32, self.radius)
        band = banded_attention if block + 2 * self.radius < T else full_attention
        out = band(q, k, v, self.radius, block)
        return dense(out.transpose(1, 2).reshape(B, T, W), self.o.weight, self.o.bias)


def dense(a, weight, bias):
    """a·weightᵀ + bias for a [B, T, in] as a 1×1 convolution: Debian's torch links the
    reference BLAS, while convolutions run in oneDNN (about 4× faster here)."""
    return F.conv1d(a.transpose(1, 2), weight[:, :, None], bias).transpose(1, 2)


def full_attention(q, k, v, radius, block=None):
    """Attention over all T×T pairs with |i − j| > radius masked (short inputs)."""
    T = q.shape[-2]
    pos = torch.arange(T)
    outside = (pos[:, None] - pos[None, :]).abs() > radius
    scores = (q @ k.transpose(-1, -2)).masked_fill(outside, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def banded_attention(q, k, v, radius, block):
    """The same attention, query blocks of `block` rows against their key span of
    block + 2·radius rows: O(T·(block + 2r)) instead of O(T²)."""
    B, H, T, dh = q.shape
    nb = -(-T // block)
    span = block + 2 * radius
    pad_q = nb * block - T
    q = F.pad(q, (0, 0, 0, pad_q)).view(B, H, nb, block, dh)
    # padded key row p holds key p − radius; block i's keys are rows i·block … i·block + span
    kp = F.pad(k, (0, 0, radius, radius + pad_q)).unfold(2, span, block)  # [B, H, nb, dh, span]
    vp = F.pad(v, (0, 0, radius, radius + pad_q)).unfold(2, span, block)
    scores = q @ kp  # [B, H, nb, block, span]
    qi = torch.arange(nb)[:, None, None] * block + torch.arange(block)[None, :, None]
    kj = torch.arange(nb)[:, None, None] * block + torch.arange(span)[None, None, :] - radius
    # padding queries (qi ≥ T) see everything: a fully masked row would be NaN, and
    # its zero gradient times NaN would poison the backward pass
    outside = (((qi - kj).abs() > radius) | (kj < 0) | (kj >= T)) & (qi < T)
    p = torch.softmax(scores.masked_fill(outside, float("-inf")), dim=-1)
    out = p @ vp.transpose(-1, -2)  # [B, H, nb, block, dh]
    return out.reshape(B, H, nb * block, dh)[:, :, :T]


class FeedForward(nn.Module):
    def __init__(self, width, ffn):
        super().__init__()
        self.up, self.down = nn.Linear(width, ffn), nn.Linear(ffn, width)

    def forward(self, a):
        h = F.gelu(dense(a, self.up.weight, self.up.bias))  # exact-erf GELU, as the C++ side
        return dense(h, self.down.weight, self.down.bias)


class EncoderLayer(nn.Module):
    def __init__(self, width, heads, ffn, window):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width, eps=1e-5), nn.LayerNorm(width, eps=1e-5)
        self.attn, self.ffn = Attention(width, heads, window), FeedForward(width, ffn)

    def forward(self, h):
        h = h + self.attn(self.norm1(h))
        return h + self.ffn(self.norm2(h))


class Encoder(nn.Module):
    """Layers named "0", "1", ... plus "norm", giving encoder.<l>.… and encoder.norm.…"""

    def __init__(self, width, layers, heads, ffn, window):
        super().__init__()
        self.depth = layers
        for l in range(layers):
            self.add_module(str(l), EncoderLayer(width, heads, ffn, window))
        self.norm = nn.LayerNorm(width, eps=1e-5)

    def forward(self, h):
        for l in range(self.depth):
            h = getattr(self, str(l))(h)
        return self.norm(h)


class OutProjection(nn.Module):
    """head.out: weight [width] and bias [1] (not nn.Linear's [1, width])."""

    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width) / math.sqrt(width))
        self.bias = nn.Parameter(torch.zeros(1))


class Head(nn.Module):
    """Cross-attention over the head axis: target queries attend over source heads."""

    def __init__(self, in_channels, targets, width):
        super().__init__()
        self.target_queries = nn.Parameter(torch.randn(targets, width) * 0.5)
        self.source_embed = nn.Parameter(torch.randn(in_channels, width) * 0.5)
        self.feature_proj = nn.Parameter(torch.randn(width) * 0.5)
        self.q, self.k, self.v = (nn.Linear(width, width, bias=False) for _ in range(3))
        self.out = OutProjection(width)

    def forward(self, x, e):
        """Ŷ [B, targets, T] from x [B, C, T] and E [B, T, W], in the C++ factored form:
        the query·key terms constant over the source axis cancel in the softmax, and
        the value projected to a scalar is linear in x. Cost O(B·T·targets·C)."""
        wq, wk, wv = self.q.weight, self.k.weight, self.v.weight
        scale = 1.0 / math.sqrt(e.shape[-1])
        qb = self.target_queries @ wq.t()            # [P, W]
        kb = self.source_embed @ wk.t()              # [C, W]
        kf = self.feature_proj @ wk.t()              # [W]
        qe = e @ wq.t()                              # [B, T, W]
        g = qb @ kb.t()                              # [P, C]
        u = qb @ kf                                  # [P]
        s = qe @ kb.t()                              # [B, T, C]
        c = qe @ kf                                  # [B, T]
        xt = x.transpose(1, 2)                       # [B, T, C]
        B, T, C = xt.shape
        P = g.shape[0]
        # logits[b,t] = g + 1·s_t + (u + c_t)·x_t, i.e. g + [1, u + c_t] @ [s_t; x_t]:
        # one fused baddbmm, so the [B·T, P, C] block is written once, not per term
        left = torch.stack([torch.ones(B, T, P), u + c[..., None]], dim=-1)   # [B, T, P, 2]
        right = torch.stack([s, xt], dim=-2)                                   # [B, T, 2, C]
        logits = torch.baddbmm(g * scale, left.reshape(B * T, P, 2),
                               right.reshape(B * T, 2, C), alpha=scale)        # [B·T, P, C]
        wv_out = self.out.weight @ wv                # [W]: value·out_w = input·wv_out
        values = self.source_embed @ wv_out + (self.feature_proj @ wv_out) * xt  # [B, T, C]
        y = torch.bmm(torch.softmax(logits, dim=-1), values.reshape(B * T, C, 1))
        y = y.view(B, T, P) + (e @ wv_out)[..., None] + self.out.bias
        return y.transpose(1, 2)

    def forward_direct(self, x, e):
        """The same Ŷ with queries, keys and values materialised (the test oracle)."""
        scale = 1.0 / math.sqrt(e.shape[-1])
        xt = x.transpose(1, 2)[..., None]                                   # [B, T, C, 1]
        q = self.q(self.target_queries + e[:, :, None, :])                  # [B, T, P, W]
        src = self.source_embed + xt * self.feature_proj + e[:, :, None, :]  # [B, T, C, W]
        p = torch.softmax(q @ self.k(src).transpose(-1, -2) * scale, dim=-1)
        y = (p @ self.v(src)) @ self.out.weight + self.out.bias             # [B, T, P]
        return y.transpose(1, 2)


class HybridAxialMapper(nn.Module):
    def __init__(self, in_channels, targets, width=64, layers=2, heads=4, ffn=128, kernel=3,
                 window=128):
        super().__init__()
        check_architecture(dict(in_channels=in_channels, targets=targets, width=width,
                                layers=layers, heads=heads, ffn=ffn, kernel=kernel, window=window))
        self.arch = dict(in_channels=in_channels, targets=targets, width=width, layers=layers,
                         heads=heads, ffn=ffn, kernel=kernel, window=window)
        self.stem = nn.Conv1d(in_channels, width, kernel, padding=kernel // 2)
        self.encoder = Encoder(width, layers, heads, ffn, window)
        self.head = Head(in_channels, targets, width)

    def encode(self, x):
        """E [B, T, W] for features x [B, C, T]."""
        h = F.gelu(self.stem_conv(x))
        return self.encoder(h + sinusoidal_positions(x.shape[-1], self.arch["width"]))

    def stem_conv(self, x):
        """The stem as im2col + matmul → [B, T, W]. Not F.conv1d: this torch build's
        oneDNN convolution returned garbage weight gradients for it (read as
        uninitialised memory: different on every run)."""
        r = self.arch["kernel"] // 2
        cols = F.pad(x, (r, r)).unfold(2, self.arch["kernel"], 1)  # [B, C, T, k]
        cols = cols.permute(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1)  # [B, T, C·k]
        return F.linear(cols, self.stem.weight.reshape(self.arch["width"], -1), self.stem.bias)

    def forward(self, x):
        """Ŷ [B, targets, T] for features x [B, in_channels, T]."""
        return self.head(x, self.encode(x))

    def forward_direct(self, x):
        return self.head.forward_direct(x, self.encode(x))

    def tensors(self):
        """{safetensors name: float32 numpy array}."""
        return {k: v.detach().cpu().numpy().astype(np.float32) for k, v in self.state_dict().items()}


def check_architecture(arch):
    """InputError naming the field for sizes the C++ mapper cannot build."""
    for name in ARCH_FIELDS:
        v = arch.get(name)
        if not isinstance(v, int) or isinstance(v, bool):
            raise InputError("architecture.%s: must be an integer (got %r)" % (name, v))
        if v < (0 if name in ("layers", "window") else 1):
            raise InputError("architecture.%s: must be %s (got %d)"
                             % (name, "≥ 0" if name in ("layers", "window") else "> 0", v))
    if arch["width"] % arch["heads"]:
        raise InputError("architecture: width %d is not divisible by heads %d"
                         % (arch["width"], arch["heads"]))
    if arch["kernel"] % 2 == 0:
        raise InputError("architecture.kernel: must be odd (same padding), got %d" % arch["kernel"])


def load_mapper(folder):
    """A HybridAxialMapper from folder/mapper.json + folder/mapper.safetensors."""
    with open(os.path.join(folder, "mapper.json")) as f:
        meta = json.load(f)
    model = HybridAxialMapper(**meta["architecture"])
    state = {k: torch.from_numpy(np.array(v)) for k, v in
             read_safetensors(os.path.join(folder, "mapper.safetensors")).items()}
    model.load_state_dict(state)
    return model, meta


# ---------------------------------------------------------------- the dataset

def _need(cond, message):
    if not cond:
        raise InputError(message)


def read_manifest(folder):
    path = os.path.join(folder, "manifest.json")
    _need(os.path.isdir(folder), "--dataset %s: no such folder" % folder)
    _need(os.path.isfile(path), "--dataset %s: no manifest.json" % folder)
    try:
        with open(path) as f:
            m = json.load(f)
    except ValueError as e:
        raise InputError("%s: not JSON (%s)" % (path, e))
    _need(isinstance(m, dict) and m.get("format") == DATASET_FORMAT,
          "%s: format must be %r (got %r)" % (path, DATASET_FORMAT,
                                              m.get("format") if isinstance(m, dict) else m))
    _need(m.get("version") == 1, "%s: version must be 1 (got %r)" % (path, m.get("version")))
    for key in ("in_channels", "targets", "window_tokens"):
        v = m.get(key)
        _need(isinstance(v, int) and not isinstance(v, bool) and v > 0,
              "%s: %s must be a positive integer (got %r)" % (path, key, v))
    _need(isinstance(m.get("shards"), list) and m["shards"],
          "%s: shards must be a non-empty list" % path)
    return m


def read_dataset(folder):
    """(manifest, features [N, C, T] f32, labels [N, P, T] f32, starts [N] i64), every
    shard's shapes checked against the manifest."""
    m = read_manifest(folder)
    C, P, T = m["in_channels"], m["targets"], m["window_tokens"]
    feats, labels, starts = [], [], []
    for i, shard in enumerate(m["shards"]):
        _need(isinstance(shard, dict) and isinstance(shard.get("file"), str),
              "%s/manifest.json: shards[%d].file is missing" % (folder, i))
        path = os.path.join(folder, shard["file"])
        _need(os.path.isfile(path), "%s: missing (listed in shards[%d])" % (path, i))
        t = read_safetensors(path)
        n = shard.get("windows")
        for name, shape in (("features", (n, C, T)), ("labels", (n, P, T)), ("starts", (n,))):
            _need(name in t, "%s: tensor %r is missing" % (path, name))
            _need(tuple(t[name].shape) == shape,
                  "%s: tensor %r has shape %s, the manifest says %s (windows, in_channels, "
                  "targets, window_tokens)" % (path, name, list(t[name].shape), list(shape)))
        for name in ("features", "labels"):
            _need(t[name].dtype == np.float32, "%s: tensor %r must be F32" % (path, name))
            _need(np.isfinite(t[name]).all(), "%s: tensor %r has NaN or inf" % (path, name))
        feats.append(t["features"])
        labels.append(t["labels"])
        starts.append(t["starts"])
    return (m, np.concatenate(feats), np.concatenate(labels),
            np.concatenate(starts).astype(np.int64))


def write_dataset(folder, features, labels, starts, target=None, proxy=None, seed=0,
                  shard_windows=64):
    """A dataset folder in the C++ producer's format (for tests and timing)."""
    os.makedirs(folder, exist_ok=True)
    N, C, T = features.shape
    shards = []
    for k, a in enumerate(range(0, N, shard_windows)):
        b = min(N, a + shard_windows)
        name = "shard-%05d.safetensors" % k
        write_safetensors(os.path.join(folder, name),
                          {"features": features[a:b].astype(np.float32),
                           "labels": labels[a:b].astype(np.float32),
                           "starts": np.asarray(starts[a:b], dtype=np.int64)})
        shards.append({"file": name, "windows": b - a})
    manifest = {
        "format": DATASET_FORMAT, "version": 1,
        "target": target or {"name": "synthetic-target", "layers": 1,
                             "kv_heads": labels.shape[1], "q_heads": labels.shape[1]},
        "proxy": proxy or {"name": "synthetic-proxy", "layers": 1, "q_heads": C,
                           "truncated_layers": None},
        "in_channels": C, "targets": labels.shape[1], "window_tokens": T,
        "features": "log_mean_attention", "labels": "kvzip_max",
        "corpus": {"file": "synthetic", "tokens": int(N * T), "span": [0, 1]}, "seed": seed,
        "shards": shards,
    }
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def synthetic_dataset(n, in_channels, targets, T, seed=0):
    """Features with a learnable link to the labels: each target row is a softmax-ish
    function of a few smoothed source rows, so training has something to find."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, in_channels, T)).astype(np.float32)
    x = (x + np.roll(x, 1, axis=2) + np.roll(x, -1, axis=2)) / 3  # a little time structure
    mix = rng.normal(size=(targets, in_channels)).astype(np.float32) * (
        rng.random((targets, in_channels)) < 0.3)
    z = np.einsum("pc,nct->npt", mix, x) * 2.0
    labels = np.exp(z - z.max(axis=2, keepdims=True)).astype(np.float32)  # (0, 1], heavy-tailed
    starts = np.arange(n, dtype=np.int64) * T
    return x, labels, starts
