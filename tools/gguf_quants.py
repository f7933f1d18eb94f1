"""Dequantisers for the GGML block formats found in llama.cpp GGUF files, in plain numpy.

Covers F32, F16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K and Q6_K (the types of a "Q4_1" llama GGUF and of a
"Q4_K_M" Gemma 3 GGUF). Each function
takes the raw bytes of whole rows, shaped [rows, bytes_per_row] as gguf.GGUFReader exposes them, and
returns float32 [rows, elements_per_row]. GGML's first dimension (ne0) is the contiguous one, so for a
weight stored as [ne0 = in, ne1 = out] the result is [out, in]: already the Hugging Face Linear layout.
Also holds the Q/K row permutation that llama.cpp's converter applies for adjacent-pair RoPE, and its
inverse. Leaves out the other K-quants and the IQ formats (a clear error names the type).
"""

from __future__ import annotations

import numpy as np

# GGML type ids (ggml.h) -> (name, weights per block, bytes per block).
GGML_TYPES = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    8: ("Q8_0", 32, 34),
    12: ("Q4_K", 256, 144),
    14: ("Q6_K", 256, 210),
}


def _blocks(raw: np.ndarray, block_bytes: int) -> np.ndarray:
    """View raw row bytes as [rows, blocks_per_row, block_bytes] uint8."""
    raw = np.ascontiguousarray(raw).view(np.uint8)
    rows = raw.shape[0] if raw.ndim > 1 else 1
    flat = raw.reshape(rows, -1)
    if flat.shape[1] % block_bytes:
        raise ValueError(f"row of {flat.shape[1]} bytes is not a whole number of {block_bytes}-byte blocks")
    return flat.reshape(rows, -1, block_bytes)


def _f16(b: np.ndarray) -> np.ndarray:
    """Little-endian fp16 stored in the last axis (2 bytes) -> float32, shape without that axis."""
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(np.float32)


def dequant_q4_0(raw: np.ndarray) -> np.ndarray:
    """Q4_0: fp16 d, 16 bytes of nibbles; x = d * (q - 8); byte j holds weights j (low) and j+16 (high)."""
    b = _blocks(raw, 18)
    d = _f16(b[..., 0:2])[..., None]
    qs = b[..., 2:18]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    return (d * q).reshape(b.shape[0], -1)


def dequant_q4_1(raw: np.ndarray) -> np.ndarray:
    """Q4_1: fp16 d, fp16 m, 16 bytes of nibbles; x = d * q + m; byte j holds weights j and j+16."""
    b = _blocks(raw, 20)
    d = _f16(b[..., 0:2])[..., None]
    m = _f16(b[..., 2:4])[..., None]
    qs = b[..., 4:20]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32)
    return (q * d + m).reshape(b.shape[0], -1)


def dequant_q5_0(raw: np.ndarray) -> np.ndarray:
    """Q5_0: fp16 d, 32 high bits (uint32), 16 bytes of nibbles; x = d * (q - 16); weight j takes
    byte j's low nibble and bit j, weight j+16 the high nibble and bit j+16."""
    b = _blocks(raw, 22)
    d = _f16(b[..., 0:2])[..., None]
    qh = np.ascontiguousarray(b[..., 2:6]).view("<u4")[..., 0:1].astype(np.uint32)  # [rows, nb, 1]
    qs = b[..., 6:22].astype(np.uint32)
    bits = (qh >> np.arange(32, dtype=np.uint32)) & 1  # [rows, nb, 32]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1) | (bits << 4)
    return (d * (q.astype(np.float32) - 16.0)).reshape(b.shape[0], -1)


def dequant_q4_k(raw: np.ndarray) -> np.ndarray:
    """Q4_K: super-block of 256 = fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins (8 each), 128 bytes
    of nibbles; sub-block s of 32 weights is x = d * sc[s] * q - dmin * m[s]. Each 32-byte run of nibbles
    holds sub-blocks 2i (low nibbles) and 2i+1 (high nibbles)."""
    b = _blocks(raw, 144)
    rows, nb = b.shape[0], b.shape[1]
    d = _f16(b[..., 0:2])[..., None, None]
    dmin = _f16(b[..., 2:4])[..., None, None]
    s = b[..., 4:16].astype(np.uint8)
    # get_scale_min_k4: sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins);
    # 4-7 from the nibbles of bytes 8-11 with their top 2 bits from the top bits of bytes 0-7.
    sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 0x0F) | ((s[..., 0:4] >> 6) << 4)], axis=-1)
    mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)], axis=-1)
    qs = b[..., 16:144].reshape(rows, nb, 4, 32)
    q = np.stack([qs & 0x0F, qs >> 4], axis=3).reshape(rows, nb, 8, 32).astype(np.float32)
    y = d * sc.astype(np.float32)[..., None] * q - dmin * mn.astype(np.float32)[..., None]
    return y.reshape(rows, -1)


def dequant_q8_0(raw: np.ndarray) -> np.ndarray:
    """Q8_0: fp16 d, then 32 signed int8 codes in order; x = d * q."""
    b = _blocks(raw, 34)
    d = _f16(b[..., 0:2])[..., None]
    q = np.ascontiguousarray(b[..., 2:34]).view(np.int8).astype(np.float32)
    return (d * q).reshape(b.shape[0], -1)


def dequant_q6_k(raw: np.ndarray) -> np.ndarray:
    """Q6_K: super-block of 256 = ql[128], qh[64], int8 scales[16], fp16 d; x = d * scale * (q - 32)."""
    b = _blocks(raw, 210)
    rows, nb = b.shape[0], b.shape[1]
    ql = b[..., 0:128].reshape(rows, nb, 2, 64)       # two 128-weight halves, 64 bytes each
    qh = b[..., 128:192].reshape(rows, nb, 2, 32)     # 32 bytes each
    sc = np.ascontiguousarray(b[..., 192:208]).view(np.int8).astype(np.float32).reshape(rows, nb, 2, 8)
    d = _f16(b[..., 208:210])[..., None, None]
    lo, hi = ql[..., :32], ql[..., 32:]
    quarters = [
        (lo & 0x0F) | (((qh >> 0) & 3) << 4),
        (hi & 0x0F) | (((qh >> 2) & 3) << 4),
        (lo >> 4) | (((qh >> 4) & 3) << 4),
        (hi >> 4) | (((qh >> 6) & 3) << 4),
    ]
    q = np.stack(quarters, axis=3).astype(np.float32) - 32.0  # [rows, nb, half, quarter, 32]
    # Within a half, weight p = 32 * quarter + l uses scale index p // 16 = 2 * quarter + l // 16.
    scale = sc.reshape(rows, nb, 2, 4, 2)[..., None].repeat(16, axis=-1).reshape(rows, nb, 2, 4, 32)
    y = d[..., None] * scale * q
    return y.reshape(rows, -1)


def dequantize(raw: np.ndarray, ggml_type: int, n_per_row: int) -> np.ndarray:
    """Dequantise rows of any supported GGML type to float32 [rows, n_per_row]."""
    if ggml_type not in GGML_TYPES:
        raise ValueError(f"GGML type id {ggml_type} is not supported (supported: "
                         f"{', '.join(n for n, _, _ in GGML_TYPES.values())})")
    name, block, _ = GGML_TYPES[ggml_type]
    if n_per_row % block:
        raise ValueError(f"{name} row length {n_per_row} is not a multiple of its block size {block}")
    if name == "F32":
        out = np.asarray(raw, dtype=np.float32).reshape(-1, n_per_row)
    elif name == "F16":
        out = np.asarray(raw).view("<f2").astype(np.float32).reshape(-1, n_per_row)
    else:
        fn = {"Q4_0": dequant_q4_0, "Q4_1": dequant_q4_1, "Q5_0": dequant_q5_0, "Q8_0": dequant_q8_0,
              "Q4_K": dequant_q4_k, "Q6_K": dequant_q6_k}[name]
        out = fn(raw)
    if out.shape[1] != n_per_row:
        raise ValueError(f"{name}: decoded {out.shape[1]} values per row, expected {n_per_row}")
    return out


def permute_for_gguf(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp converter's Q/K row order: within each head, rows (i, i + d/2) become (2i, 2i + 1)."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_from_gguf(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of permute_for_gguf: back to the Hugging Face half-split RoPE row order."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
