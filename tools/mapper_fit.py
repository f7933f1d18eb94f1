#!/usr/bin/env python3
"""How closely trained ProxyKV mappers fit a dataset's labels on its windows.

"KVZip" below stands for the dataset's labels: KVZip's scores (`labels` kvzip_max) or the
attention of the tokens after each window (continuation_max); the first line printed says which.

Selection as `kvshift quality --budget global` makes it: the first --sinks and last --recent
tokens are forced (left out here), and one budget of ⌈ρ·T·heads⌉ − forced·heads tokens is
spread over all KV heads by score. Per mapper and ρ, means over the windows of
  recall        the share of KVZip's selection the mapper's selection holds;
  mass          KVZip's score summed over the mapper's selection, over the same sum on
                KVZip's own (the label mass kept);
  wrong heads   Σ_heads |KVZip's count − the mapper's| / (2·budget): the share of the budget
                the mapper gives to other heads than KVZip does.
These say how well the labels are fitted, not what the next tokens lose (`kvshift quality`).

Usage: mapper_fit.py --dataset DIR --mapper DIR [--mapper DIR ...] [--validation-of SEED]
       [--ratios 0.3,0.5] [--sinks 4] [--recent 32]
Exit 2 on bad input, naming the flag."""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mapper_model as mm  # noqa: E402
import train_mapper as tm  # noqa: E402


def fit_measures(pred, label, rho, sinks, recent):
    """(recall, mass, wrong heads) of one window: pred, label [heads, T]."""
    heads, T = label.shape
    free = torch.ones(T, dtype=torch.bool)
    free[:sinks] = False
    if recent:
        free[T - recent:] = False
    lab, pr = label[:, free].reshape(-1), pred[:, free].reshape(-1)
    k = min(lab.numel(), max(1, math.ceil(rho * T * heads) - (T - int(free.sum())) * heads))
    theirs = torch.zeros(lab.numel(), dtype=torch.bool)
    theirs[lab.topk(k).indices] = True
    mine = torch.zeros(lab.numel(), dtype=torch.bool)
    mine[pr.topk(k).indices] = True
    recall = float((theirs & mine).sum()) / k
    mass = float(lab[mine].sum() / lab[theirs].sum())
    per_head = (theirs.reshape(heads, -1).sum(1) - mine.reshape(heads, -1).sum(1)).abs()
    return recall, mass, float(per_head.sum()) / (2 * k)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--mapper", action="append", required=True, help="a train_mapper.py --out")
    ap.add_argument("--validation-of", type=int, metavar="SEED",
                    help="only the validation windows of train_mapper.py --seed SEED with its "
                         "default --val-share 0.15 (default: every window, for a dataset "
                         "outside the training span)")
    ap.add_argument("--ratios", default="0.3,0.5")
    ap.add_argument("--sinks", type=int, default=4)
    ap.add_argument("--recent", type=int, default=32)
    a = ap.parse_args(argv)
    try:
        ratios = [float(r) for r in a.ratios.split(",")]
    except ValueError:
        raise mm.InputError("--ratios: expected numbers separated by commas (got %r)" % a.ratios)
    if not all(0 < r <= 1 for r in ratios):
        raise mm.InputError("--ratios: each must be in (0, 1] (got %r)" % a.ratios)
    if a.sinks < 0 or a.recent < 0:
        raise mm.InputError("--sinks, --recent: must be >= 0")
    manifest, x, y, _ = mm.read_dataset(a.dataset)
    if a.sinks + a.recent >= y.shape[2]:
        raise mm.InputError("--sinks + --recent: must leave tokens of the %d-token windows"
                            % y.shape[2])
    idx = (np.arange(len(x)) if a.validation_of is None
           else tm.split_windows(len(x), 0.15, a.validation_of)[1])
    X, Y = torch.from_numpy(x[idx]), torch.from_numpy(y[idx])
    print("%d windows of %s (labels %s); forced: first %d, last %d"
          % (len(idx), a.dataset, manifest.get("labels", "kvzip_max"), a.sinks, a.recent))
    for folder in a.mapper:
        if not os.path.isfile(os.path.join(folder, "mapper.json")):
            raise mm.InputError("--mapper %s: no mapper.json" % folder)
        model, _ = mm.load_mapper(folder)
        model.eval()
        with torch.no_grad():
            P = model(X)
        for rho in ratios:
            m = np.mean([fit_measures(P[b], Y[b], rho, a.sinks, a.recent)
                         for b in range(len(idx))], axis=0)
            print("%s  rho %.2f  recall %.4f  mass %.4f  wrong heads %.4f"
                  % (folder, rho, m[0], m[1], m[2]))


if __name__ == "__main__":
    torch.set_num_threads(1)
    try:
        main(sys.argv[1:])
    except mm.InputError as e:
        print("mapper_fit: %s" % e, file=sys.stderr)
        sys.exit(2)
