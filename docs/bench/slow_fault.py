#!/usr/bin/env python3
"""A fault that starts slowly in an autocorrelated plant (BENCHMARKS §12.35.1): a generated
stand-in for 3W's and TEP's faults, to choose a calibration on without the real sets.

Three sensors as probe_targets.py's (70 +- 2, 1013 +- 1.5, 45 +- 3), AR(1) noise of coefficient
--phi (0.99: a correlation time of 100 rows), --rows rows (100,000: past the default window,
so the stream is scored after min_records 5000 by models of the recent window). From a row drawn
in [0.6, 0.85] of the stream, for --len rows (5,000), one of:

  stepM     temperature + M robust sd at once
  rampM     temperature rising linearly to + M robust sd over 3/5 of the fault, then held
  ramp2sM   temperature + M and humidity - M robust sd, both ramped as rampM (a process shift)

(robust sd: 1.4826 x MAD of the stationary noise, as probe_targets.py's). The fault's rows are
labelled 1. Reported per build and kind: faults found (any fault row flagged), the delay to the
first flag (rows), the share of fault rows flagged, and the clean rows flagged (rows >= 5000
outside the fault).

  python docs/bench/slow_fault.py --binary B [--binary B2 ...] --work DIR [--seeds 1-6]
      [--kinds step3,step4,ramp4,ramp6,ramp2s3] [--results FILE]
"""
import argparse
import json
import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_targets import LEVEL, NAMES, SD, ar1, rsd, run_replay  # noqa: E402

MINREC = 5000


def make(kind, seed, phi, rows, length):
    rng = np.random.default_rng([seed, 1919])
    noise = ar1(rng, rows, 3, phi) * SD
    x = LEVEL + noise
    unit = rsd(noise)
    start = int(rng.integers(int(0.6 * rows), int(0.85 * rows)))
    end = min(start + length, rows)
    t = np.arange(end - start)
    if kind.startswith("step"):
        m, shape, sensors = float(kind[4:]), np.ones(len(t)), [(0, 1.0)]
    elif kind.startswith("ramp2s"):
        m, sensors = float(kind[6:]), [(0, 1.0), (2, -1.0)]
        shape = np.minimum(t / (0.6 * length), 1.0)
    elif kind.startswith("ramp"):
        m, sensors = float(kind[4:]), [(0, 1.0)]
        shape = np.minimum(t / (0.6 * length), 1.0)
    else:
        raise ValueError(kind)
    for j, sign in sensors:
        x[start:end, j] += sign * m * unit[j] * shape
    lab = np.zeros(rows, dtype=int)
    lab[start:end] = 1
    df = pd.DataFrame(x, columns=NAMES)
    df["label"] = lab
    return df, start, end


def run(binary, path, vpath):
    run_replay(binary, path, vpath)
    return pd.read_csv(vpath)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--binary", action="append", required=True)
    a.add_argument("--work", required=True)
    a.add_argument("--seeds", default="1-6")
    a.add_argument("--kinds", default="step3,step4,ramp4,ramp6,ramp2s3")
    a.add_argument("--phi", type=float, default=0.99)
    a.add_argument("--rows", type=int, default=100000)
    a.add_argument("--len", type=int, default=5000)
    a.add_argument("--results", default=None)
    o = a.parse_args()
    lo, _, hi = o.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    os.makedirs(o.work, exist_ok=True)
    res = []
    for kind in o.kinds.split(","):
        for seed in seeds:
            df, start, end = make(kind, seed, o.phi, o.rows, o.len)
            path = os.path.join(o.work, f"{kind}_s{seed}.csv")
            df.to_csv(path, index=False)
            for b in o.binary:
                v = run(b, path, os.path.join(o.work, "v.csv"))
                fl = v["outlier"].to_numpy().astype(bool)
                f = fl[start:end]
                clean = np.r_[fl[MINREC:start], fl[end:]]
                hit = np.flatnonzero(f)
                r = {"build": os.path.basename(b), "kind": kind, "seed": seed, "start": start,
                     "found": bool(len(hit)), "delay": int(hit[0]) if len(hit) else None,
                     "fault_share": float(f.mean()), "clean_flags": int(clean.sum()),
                     "clean_share": float(clean.mean())}
                res.append(r)
                print(json.dumps(r), flush=True)
                if o.results:
                    with open(o.results, "a") as fh:
                        fh.write(json.dumps(r) + "\n")
            os.remove(path)
    summarise(res)


def summarise(res):
    df = pd.DataFrame(res)
    print("| build | kind | found | delay med (rows) | fault rows flagged med | clean flagged med / max |")
    print("|---|---|---|---|---|---|")
    for (b, k), g in df.groupby(["build", "kind"], sort=False):
        d = g["delay"].dropna()
        print(f"| {b} | {k} | {int(g['found'].sum())}/{len(g)} | "
              f"{int(d.median()) if len(d) else '-'} | {g['fault_share'].median():.3f} | "
              f"{100 * g['clean_share'].median():.3f} % / {100 * g['clean_share'].max():.3f} % |")


if __name__ == "__main__":
    main()
