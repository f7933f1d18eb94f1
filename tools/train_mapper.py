#!/usr/bin/python3
"""Trains the ProxyKV HybridAxialMapper on a `kvshift proxykv dataset` folder and
writes OUT/mapper.safetensors + OUT/mapper.json (read by the C++ load_mapper())
and OUT/train.log. See tools/README.md, "Training the ProxyKV mapper".

Deterministic on CPU for a given seed, thread count and torch build. Exit codes:
0 done, 2 bad input (the message names the flag or file), 3 non-finite loss (the
message names the step; the best checkpoint so far, if any, stays in OUT).
Leaves out: GPUs, resuming, and any feature transform (features are used as stored).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mapper_model as mm  # noqa: E402
from mapper_model import InputError  # noqa: E402

MIN_WINDOWS = 4          # at least one validation window and three to train on
LABEL_FLOOR = 1e-4       # log(label + floor): KVZip maxima below 1e-4 all count as "unused"
TOPK_SHARPNESS = 2.0     # BCE logits = 2·(standardised Ŷ − threshold)
EXIT_BAD_INPUT, EXIT_NONFINITE = 2, 3


# ---------------------------------------------------------------- the loss

def standardise(z):
    return (z - z.mean(-1, keepdim=True)) / (z.std(-1, keepdim=True) + 1e-6)


def label_ranks(label):
    """rank[b, p, t] = position of token t in row (b, p) sorted by label, descending."""
    order = torch.sort(label, dim=-1, descending=True, stable=True)[1]
    ranks = torch.empty_like(order)
    ranks.scatter_(-1, order, torch.arange(label.shape[-1]).expand_as(order))
    return order, ranks


def budget_rows(t, budget):
    """[B, targets, T] as the rows the selection ranks: per target row (per-head budget), or
    one row of targets·T per window (global budget: every head's tokens compete)."""
    return t if budget == "per-head" else t.reshape(t.shape[0], 1, -1)


class HybridLoss:
    """The five-term ProxyKV loss on Ŷ, label [B, targets, T]. Ranking is per row of
    budget_rows: a target row (the C++ side keeps each row's top-K) or, for a global budget
    (`kvshift quality --budget global`), a whole window, so that Ŷ's values are comparable
    across heads. Every term works within a row.
      topk: for each ρ, the label's top-⌈ρT⌉ are positives; BCE on
            s·(ŷ − τ) with ŷ the row-standardised Ŷ and τ the (detached) midpoint of
            its k-th and (k+1)-th largest values — a smooth surrogate of exactly the
            decision "is the token in Ŷ's top-k"; positives and negatives averaged
            separately (balanced), ratios weighted ∝ 1/√ρ so small budgets count most.
      mse:  (ŷ − ℓ)² with ℓ the row-standardised log(label + 1e-4), weighted by
            1 + relu(ℓ) so tokens above their row's typical score count more.
      rank: ListMLE (Plackett–Luce likelihood) of the label's order inside its
            top-⌈rank_ratio·T⌉, on raw Ŷ, divided by log K.
      mass: p = softmax(Ŷ) over the row, q = label / Σ label; for each ρ the
            Bernoulli KL between q's and p's mass on the label's top-k (zero when the
            predicted distribution puts the label's share there), same ρ weights.
      cos:  1 − cos(p, label): the predicted distribution points like the label row.
    The label transform is internal; only Ŷ's order within a row matters downstream."""

    def __init__(self, T, ratios, weights, rank_ratio, budget="per-head"):
        self.budget = budget
        self.ks = [min(T - 1, max(1, math.ceil(r * T))) for r in ratios]
        w = torch.tensor([1.0 / math.sqrt(r) for r in ratios])
        self.ratio_w = (w / w.sum()).tolist()
        self.k_rank = min(T, max(2, math.ceil(rank_ratio * T)))
        self.weights = weights

    def __call__(self, y, label):
        y, label = budget_rows(y, self.budget), budget_rows(label, self.budget)
        order, ranks = label_ranks(label)
        ys = standardise(y)
        ell = standardise(torch.log(label + LABEL_FLOOR))
        p = torch.softmax(y, dim=-1)
        q = label / (label.sum(-1, keepdim=True) + 1e-12)
        parts = {"topk": self.topk(ys, ranks), "mse": self.mse(ys, ell),
                 "rank": self.listmle(y, order), "mass": self.mass(p, q, ranks),
                 "cos": 1.0 - torch.nn.functional.cosine_similarity(p, label, dim=-1).mean()}
        total = sum(self.weights[k] * v for k, v in parts.items())
        return total, parts

    def topk(self, ys, ranks):
        top = ys.detach().sort(dim=-1, descending=True)[0]
        loss = 0.0
        for k, w in zip(self.ks, self.ratio_w):
            tau = 0.5 * (top[..., k - 1:k] + top[..., k:k + 1])
            logit = TOPK_SHARPNESS * (ys - tau)
            pos = (ranks < k).float()
            n = ys.shape[-1]
            bce_pos = (pos * torch.nn.functional.softplus(-logit)).sum(-1) / k
            bce_neg = ((1 - pos) * torch.nn.functional.softplus(logit)).sum(-1) / (n - k)
            loss = loss + w * 0.5 * (bce_pos + bce_neg).mean()
        return loss

    @staticmethod
    def mse(ys, ell):
        w = 1.0 + torch.relu(ell)
        return ((w * (ys - ell) ** 2).sum(-1) / w.sum(-1)).mean()

    def listmle(self, y, order):
        s = y.gather(-1, order[..., : self.k_rank])  # Ŷ in the label's order, best first
        tail = torch.logcumsumexp(s.flip(-1), dim=-1).flip(-1)  # log Σ_{j ≥ i} exp s_j
        return (tail - s).mean() / math.log(self.k_rank)

    def mass(self, p, q, ranks):
        loss = 0.0
        for k, w in zip(self.ks, self.ratio_w):
            member = (ranks < k).float()
            ps = (p * member).sum(-1).clamp(1e-6, 1 - 1e-6)
            qs = (q * member).sum(-1).clamp(1e-6, 1 - 1e-6)
            kl = qs * torch.log(qs / ps) + (1 - qs) * torch.log((1 - qs) / (1 - ps))
            loss = loss + w * kl.mean()
        return loss


def recall_at(y, label, ratio, budget="per-head"):
    """Share of the label's top-⌈ρT⌉ tokens per row (of budget_rows) that Ŷ's top-⌈ρT⌉
    also holds (nothing excluded: sinks and the recent window are forced at inference)."""
    y, label = budget_rows(y, budget), budget_rows(label, budget)
    k = max(1, math.ceil(ratio * y.shape[-1]))
    mine = torch.zeros_like(y).scatter_(-1, y.topk(k, dim=-1)[1], 1.0)
    theirs = torch.zeros_like(label).scatter_(-1, label_ranks(label)[0][..., :k], 1.0)
    return float((mine * theirs).sum() / (k * y.shape[0] * y.shape[1]))


# ---------------------------------------------------------------- flags

def parse_args(argv):
    ap = argparse.ArgumentParser(description="Train the ProxyKV HybridAxialMapper.")
    ap.add_argument("--dataset", required=True, help="folder with manifest.json + shards")
    ap.add_argument("--out", required=True, help="folder for mapper.safetensors/.json, train.log")
    for name, default in (("width", 64), ("layers", 2), ("heads", 4), ("ffn", 128),
                          ("kernel", 3), ("window", 128)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--patience", type=int, default=5,
                    help="epochs without a better validation recall@0.5 before stopping")
    ap.add_argument("--val-share", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    ap.add_argument("--ratios", default="0.05,0.1,0.2,0.3,0.5")
    ap.add_argument("--budget", choices=("per-head", "global"), default="per-head",
                    help="what the ranking terms rank: each head's tokens (an equal budget per "
                         "head) or all heads' tokens of a window together (kvshift quality "
                         "--budget global)")
    ap.add_argument("--rank-ratio", type=float, default=0.2,
                    help="the ranking term orders the label's top-⌈ρT⌉")
    for name, default in (("topk", 1.0), ("mse", 0.5), ("rank", 0.5), ("mass", 0.5),
                          ("cos", 0.5)):
        ap.add_argument("--w-" + name, type=float, default=default)
    args = ap.parse_args(argv)
    check_args(args)
    return args


def check_args(a):
    for name in ("width", "layers", "heads", "ffn", "kernel", "window", "epochs", "batch",
                 "patience", "threads"):
        if getattr(a, name) <= 0:
            raise InputError("--%s: must be > 0 (got %d)" % (name, getattr(a, name)))
    if a.max_steps is not None and a.max_steps <= 0:
        raise InputError("--max-steps: must be > 0 (got %d)" % a.max_steps)
    if a.width % a.heads:
        raise InputError("--width %d is not divisible by --heads %d" % (a.width, a.heads))
    if a.kernel % 2 == 0:
        raise InputError("--kernel: must be odd (same padding), got %d" % a.kernel)
    if not a.lr > 0 or not math.isfinite(a.lr):
        raise InputError("--lr: must be > 0 (got %g)" % a.lr)
    if not a.weight_decay >= 0:
        raise InputError("--weight-decay: must be ≥ 0 (got %g)" % a.weight_decay)
    if not 0 < a.val_share < 1:
        raise InputError("--val-share: must be in (0, 1) (got %g)" % a.val_share)
    if not 0 < a.rank_ratio <= 1:
        raise InputError("--rank-ratio: must be in (0, 1] (got %g)" % a.rank_ratio)
    try:
        a.ratio_list = [float(r) for r in a.ratios.split(",")]
    except ValueError:
        raise InputError("--ratios: a comma-separated list of numbers (got %r)" % a.ratios)
    for r in a.ratio_list:
        if not 0 < r < 1:
            raise InputError("--ratios: every ρ must be in (0, 1) (got %g)" % r)
    weights = [getattr(a, "w_" + n) for n in ("topk", "mse", "rank", "mass", "cos")]
    if any(not w >= 0 for w in weights) or sum(weights) == 0:
        raise InputError("--w-topk/--w-mse/--w-rank/--w-mass/--w-cos: must be ≥ 0, not all 0")


# ---------------------------------------------------------------- training

class Log:
    """Prints and appends to OUT/train.log."""

    def __init__(self, path):
        self.f = open(path, "w")

    def __call__(self, text):
        print(text, flush=True)
        self.f.write(text + "\n")
        self.f.flush()


def split_windows(n, share, seed):
    """(train, validation) index arrays from a seeded shuffle; at least one of each."""
    perm = np.random.default_rng(seed).permutation(n)
    n_val = min(n - 1, max(1, round(share * n)))
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def evaluate(model, loss_fn, x, y, batch, ratios, budget):
    model.eval()
    preds, losses = [], []
    with torch.no_grad():
        for a in range(0, len(x), batch):
            out = model(x[a:a + batch])
            losses.append(float(loss_fn(out, y[a:a + batch])[0]) * len(out))
            preds.append(out)
    pred = torch.cat(preds)
    row = {"loss": sum(losses) / len(x)}
    for r in sorted(set([0.5, 0.2] + ratios), reverse=True):
        row["recall@%g" % r] = recall_at(pred, y, r, budget)
    return row


def learning_rate(step, total, base):
    """Linear warm-up over the first 5 % of steps, then cosine decay to 5 % of base."""
    warm = max(1, total // 20)
    if step < warm:
        return base * (step + 1) / warm
    t = (step - warm) / max(1, total - warm)
    return base * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


class NonFinite(Exception):
    pass


class Trainer:
    def __init__(self, args, manifest, x, y, starts, log):
        self.a, self.manifest, self.log = args, manifest, log
        self.train_idx, self.val_idx = split_windows(len(x), args.val_share, args.seed)
        self.x, self.y, self.starts = x, y, starts
        arch = dict(in_channels=x.shape[1], targets=y.shape[1], width=args.width,
                    layers=args.layers, heads=args.heads, ffn=args.ffn, kernel=args.kernel,
                    window=args.window)
        self.model = mm.HybridAxialMapper(**arch)
        weights = {n: getattr(args, "w_" + n) for n in ("topk", "mse", "rank", "mass", "cos")}
        rows_t = x.shape[2] * (y.shape[1] if args.budget == "global" else 1)
        self.loss_fn = HybridLoss(rows_t, args.ratio_list, weights, args.rank_ratio,
                                  args.budget)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr,
                                     weight_decay=args.weight_decay)
        per_epoch = math.ceil(len(self.train_idx) / args.batch)
        self.total_steps = min(args.epochs * per_epoch, args.max_steps or 1 << 62)
        self.step, self.history, self.best = 0, [], None
        self.written = False

    def train_epoch(self, epoch, gen):
        self.model.train()
        order = self.train_idx[torch.randperm(len(self.train_idx), generator=gen).numpy()]
        total, count = 0.0, 0
        for b in range(0, len(order), self.a.batch):
            if self.step >= self.total_steps:
                break
            idx = torch.from_numpy(order[b:b + self.a.batch])
            loss, _ = self.loss_fn(self.model(self.x[idx]), self.y[idx])
            if not torch.isfinite(loss):
                raise NonFinite("loss is %s at step %d (epoch %d, batch %d)"
                                % (float(loss), self.step + 1, epoch, b // self.a.batch + 1))
            for g in self.opt.param_groups:
                g["lr"] = learning_rate(self.step, self.total_steps, self.a.lr)
            self.opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.step += 1
            total, count = total + float(loss) * len(idx), count + len(idx)
        return total / max(1, count)

    def better(self, row):
        """Early stopping criterion: validation recall@0.5, ties broken by lower loss."""
        if self.best is None:
            return True
        key = lambda r: (round(r["recall@0.5"], 6), -r["loss"])
        return key(row) > key(self.best)

    def run(self, t0):
        gen = torch.Generator().manual_seed(self.a.seed)
        stale, reason, epoch = 0, "ran --epochs %d" % self.a.epochs, 0
        while epoch < self.a.epochs:
            epoch += 1
            te = time.time()
            train_loss = self.train_epoch(epoch, gen)
            row = dict(epoch=epoch, train_loss=train_loss,
                       **evaluate(self.model, self.loss_fn, self.x[self.val_idx],
                                  self.y[self.val_idx], self.a.batch, self.a.ratio_list,
                                  self.a.budget))
            row["seconds"] = time.time() - te
            self.history.append(row)
            improved = self.better(row)
            if improved:
                self.best, stale = row, 0
                self.save(t0, "running")
            else:
                stale += 1
            self.report(row, improved, t0)
            if stale >= self.a.patience:
                reason = "early stop: no better validation recall@0.5 for %d epochs" % stale
                break
            if self.a.max_steps and self.step >= self.a.max_steps:
                reason = "reached --max-steps %d" % self.a.max_steps
                break
        return epoch, reason

    def report(self, row, improved, t0):
        elapsed = time.time() - t0
        per = elapsed / row["epoch"]
        eta = per * (self.a.epochs - row["epoch"])
        self.log("epoch %3d  train %.4f  val %.4f  recall@0.5 %.4f  recall@0.2 %.4f  "
                 "%.1f s  (%.0f s total, ETA ≤ %.0f s)%s"
                 % (row["epoch"], row["train_loss"], row["loss"], row["recall@0.5"],
                    row["recall@0.2"], row["seconds"], elapsed, eta,
                    "  *best*" if improved else ""))

    def save(self, t0, reason, epochs=None):
        """Weights (on a new best) then mapper.json, each written to a tmp name and renamed."""
        if reason == "running":
            mm.write_safetensors(os.path.join(self.a.out, "mapper.safetensors"),
                                 self.model.tensors())
            self.written = True
        meta = self.metadata(t0, reason, epochs if epochs is not None else len(self.history))
        path = os.path.join(self.a.out, "mapper.json")
        tmp = path + ".tmp.%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)

    def metadata(self, t0, reason, epochs):
        a, m = self.a, self.manifest
        flags = {k: v for k, v in vars(a).items() if k != "ratio_list"}
        flags["ratios"] = a.ratio_list
        return {
            "format": mm.MAPPER_FORMAT, "version": 1, "architecture": self.model.arch,
            "training": {"flags": flags, "seed": a.seed, "torch": torch.__version__,
                         "threads": a.threads, "steps": self.step, "epochs_run": epochs,
                         "best_epoch": self.best["epoch"] if self.best else None,
                         "wall_seconds": round(time.time() - t0, 2), "stop_reason": reason,
                         "early_stopping": "validation recall@0.5 (ties: lower loss)"},
            "dataset": {"path": os.path.abspath(a.dataset), "target": m.get("target"),
                        "proxy": m.get("proxy"), "corpus": m.get("corpus"),
                        "window_tokens": m["window_tokens"], "features": m.get("features"),
                        "labels": m.get("labels"), "seed": m.get("seed"),
                        "windows": {"train": len(self.train_idx),
                                    "validation": len(self.val_idx)},
                        "starts": {"train": self.starts[self.train_idx].tolist(),
                                   "validation": self.starts[self.val_idx].tolist()}},
            "validation": self.history,
        }


def main(argv):
    t0 = time.time()
    args = parse_args(argv)
    manifest, feats, labels, starts = mm.read_dataset(args.dataset)
    if len(feats) < MIN_WINDOWS:
        raise InputError("--dataset %s: %d windows, at least %d are needed (train + validation)"
                         % (args.dataset, len(feats), MIN_WINDOWS))
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise InputError("--out %s: exists and is not a folder" % args.out)
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(args.threads)
    log = Log(os.path.join(args.out, "train.log"))
    trainer = Trainer(args, manifest, torch.from_numpy(feats), torch.from_numpy(labels),
                      starts, log)
    log("dataset %s: %d windows × %d channels × %d targets × T=%d; train %d, validation %d"
        % (args.dataset, len(feats), feats.shape[1], labels.shape[1], feats.shape[2],
           len(trainer.train_idx), len(trainer.val_idx)))
    log("mapper %s, %d parameters; torch %s, %d threads, seed %d"
        % (trainer.model.arch, sum(p.numel() for p in trainer.model.parameters()),
           torch.__version__, args.threads, args.seed))
    try:
        epochs, reason = trainer.run(t0)
    except NonFinite as e:
        kept = ("the best checkpoint so far (epoch %d) stays in %s"
                % (trainer.best["epoch"], args.out)) if trainer.written else \
            "no checkpoint was written (no epoch finished)"
        log("error: non-finite loss: %s; %s" % (e, kept))
        if trainer.written:
            trainer.save(t0, "non-finite loss: %s" % e)
        return EXIT_NONFINITE
    trainer.save(t0, reason, epochs)
    b = trainer.best
    log("done: %s; best epoch %d (val recall@0.5 %.4f, recall@0.2 %.4f), %.1f s; wrote %s"
        % (reason, b["epoch"], b["recall@0.5"], b["recall@0.2"], time.time() - t0,
           os.path.join(args.out, "mapper.safetensors")))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except InputError as e:
        print("train_mapper: error: %s" % e, file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
