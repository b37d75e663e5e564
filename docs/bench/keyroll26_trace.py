#!/usr/bin/env python3
"""Why models per key flag a clean fleet with a rolling derived column (docs/BENCHMARKS.md §12.59.1).

    outlierd gen --kind sensors --rows 40000 --head 10000 --spike-rate 0 --keys 50 --sensors 2 --seed 1 > clean1.csv
    ~/.cache/outlierd/bench-venv/bin/python docs/bench/keyroll26_trace.py clean1.csv

For each key's series of value1 and value2 it rebuilds the derived columns (std and mean of the
last 32 values, the current one included, as ingest.derive computes them) and imitates a key's
model at the defaults: a build every 50 of the key's records (keys.rebuild_records, a quarter of
keys.window) from its last 200 (keys.window), which then scores the key's next 50 records (the
fresh records). Each series' first 300 records are left out (the rolling window filling, the
first models). Two measurements, each for the raw values alone (none) and with the std or mean
columns:

1. The distance score's calibration (leave-one-out against an exclusion zone). The model
   calibrates the k-NN weight (k 10, features standardised by the window's median and sd) on the
   window's own records, each against the others (solvingset.KNNWeightsMembers: a record is not
   its own neighbour): "loo". With a rolling column a member's time neighbours are near
   duplicates of it. "ez" leaves out every member within 32 rows (an exclusion zone). Each fresh
   record's weight gets its surprisal -log10(share of the calibration at or above it, at least
   0.5/200): calibrated, the mean is 0.434 and 1 in 201 (0.005) pass the calibration's largest ("beyond").
2. How far fresh values fall from the key's window, per column: |x - window median| in the
   window's robust sd (1.4826 MAD), the unit of the explanations' "robust sd from its key's
   window's median", and the window's robust sd against the whole series'.

numpy: docs/bench's venv (~/.cache/outlierd/bench-venv, any bench script creates it).
"""
import csv
import sys

import numpy as np

LAST, WINDOW, EVERY, K, SKIP = 32, 200, 50, 10, 300


def rolling(x, kind):
    out = np.empty_like(x)
    for t in range(len(x)):
        w = x[max(0, t - LAST + 1):t + 1]
        out[t] = (w.std(ddof=1) if len(w) > 1 else 0.0) if kind == "std" else w.mean()
    return out


def knn_weights(S, Q, excluded=None):
    d = np.sqrt(((Q[:, None, :] - S[None, :, :]) ** 2).sum(-1))
    if excluded is not None:
        d = np.where(excluded, np.inf, d)
    d.sort(axis=1)
    return d[:, :K].sum(1)


def surprisal(cal, x):
    cal = np.sort(cal)
    above = len(cal) - np.searchsorted(cal, x, side="left")
    return -np.log10(np.maximum(above, 0.5) / len(cal))


def main(path):
    series = {}
    for r in csv.DictReader(open(path)):
        series.setdefault(r["key"], []).append((float(r["value1"]), float(r["value2"])))
    i = np.arange(WINDOW)
    self_only = i[:, None] == i[None, :]
    zone = np.abs(i[:, None] - i[None, :]) < LAST
    print("1. distance calibration: fresh records' surprisal (calibrated: mean 0.434, beyond 0.005)")
    for kind in ("none", "std", "mean"):
        res = {"loo": [], "ez": []}
        for s in series.values():
            x = np.array(s)
            X = x if kind == "none" else np.column_stack([x, rolling(x[:, 0], kind), rolling(x[:, 1], kind)])
            for b in range(SKIP, len(X) - EVERY, EVERY):
                W = X[b - WINDOW:b]
                mu, sd = np.median(W, 0), W.std(0)
                Ws, F = (W - mu) / sd, (X[b:b + EVERY] - mu) / sd
                fresh = knn_weights(Ws, F)
                res["loo"].append(surprisal(knn_weights(Ws, Ws, self_only), fresh))
                res["ez"].append(surprisal(knn_weights(Ws, Ws, zone), fresh))
        for name, v in res.items():
            v = np.concatenate(v)
            print(f"  {kind:5s} {name:4s} fresh records {len(v)}: mean {v.mean():.3f}, beyond the calibration {np.mean(v >= 2.5):.4f}")
    print("2. fresh values against the key's window (value1's columns)")
    for kind in ("raw", "std", "mean"):
        z, ratio, out = [], [], []
        for s in series.values():
            x = np.array(s)[:, 0]
            c = (x if kind == "raw" else rolling(x, kind))[LAST:]
            whole = 1.4826 * np.median(np.abs(c - np.median(c)))
            for b in range(WINDOW, len(c) - EVERY, EVERY):
                W, F = c[b - WINDOW:b], c[b:b + EVERY]
                med = np.median(W)
                rsd = 1.4826 * np.median(np.abs(W - med))
                z.append(np.abs(F - med) / rsd)
                ratio.append(rsd / whole)
                out.append(np.mean((F > W.max()) | (F < W.min())))
        z, ratio = np.concatenate(z), np.array(ratio)
        print(f"  {kind:5s} |z| >= 3: {np.mean(z >= 3):.4f}, >= 5: {np.mean(z >= 5):.4f}; beyond the window's range "
              f"{np.mean(out):.4f}; window robust sd / series' median {np.median(ratio):.2f}, 10th percentile {np.percentile(ratio, 10):.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
