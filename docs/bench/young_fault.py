#!/usr/bin/env python3
"""A fault early in a short, autocorrelated stream, scored by young models: a generated stand-in
shaped like Petrobras 3W (docs/bench/notes/wander20.md), to choose a calibration on without the
real sets. slow_fault.py's faults sit in 100,000-row streams under models of a full 50,000-row
window and did not predict 3W (BENCHMARKS §12.35.1); 3W's instances (unseen.py's threew()) are a
normal period of 1,800-7,000 rows whose first 60 % is the probation, then the rest of it and the
event (2,000-16,000 rows), so every model that scores them is young.

A stream, per seed and kind (rng = default_rng([seed, 2020, kind's number])):
  - normal rows N ~ U[2000, 7000]; the probation P = 0.6 N (`replay --min-records P`, as
    unseen.py runs 3W); the event's E ~ U[2000, 12000] rows follow the normal ones;
  - five sensors at levels 10, 100, 1000, 50, 0.5, each AR(1) noise of its own coefficient, 1 - phi
    log-uniform in [0.001, 0.01] (correlation times of 100 to 1,000 rows: 1-second sensors with
    a process lag), stationary sd 1, 3, 20, 2, 0.01; sensor 1 is 0.8 sensor 0 + 0.6 its own noise
    (an upstream and a downstream pressure);
  - the event, on sensor 0 (and 2 for shift) in robust sd of that sensor's stationary noise
    (1.4826 x MAD, as probe_targets.py's rsd), its transient T ~ U[0.1, 0.5] E rows:
      stepM   + M at once and held (a valve closing: 3W's classes 2, 6)
      rampM   + M reached linearly over the transient, then held (classes 1, 5)
      shiftM  sensor 0 + M and sensor 2 - M, both ramped as rampM (a process shift)
      slowM   a linear drift from the event's start reaching + M at the stream's end (scaling,
              hydrate: classes 7, 8)
  - the same stream without the event (clean), also replayed: the false alarms of young models
    on a healthy autocorrelated stream of that shape.

Rows labelled 1 from the event's first row. Per build: events found (a flag on any event row),
the delay to the first flag, false events (runs of flags on normal rows after the probation,
unseen.py's events()), the share of normal rows flagged, and on the clean twin the share of rows
after the probation flagged and its runs.

  python docs/bench/young_fault.py --binary B [--binary B2 ...] --work DIR [--seeds 1-8]
      [--kinds step3,ramp3,ramp5,shift3,slow4,slow8] [--results FILE]
"""
import argparse
import json
import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_targets import ar1, rsd, run_replay  # noqa: E402

LEVEL = np.array([10.0, 100.0, 1000.0, 50.0, 0.5])
SD = np.array([1.0, 3.0, 20.0, 2.0, 0.01])
NAMES = ["p_pdg", "p_tpt", "t_tpt", "p_mon", "qgl"]
KINDS = ["step3", "ramp3", "ramp5", "shift3", "slow4", "slow8"]


def make(kind, seed):
    """(faulty frame, clean frame, probation rows, event start)."""
    rng = np.random.default_rng([seed, 2020, KINDS.index(kind) if kind in KINDS else 99])
    n_normal = int(rng.integers(2000, 7001))
    p = int(0.6 * n_normal)
    e = int(rng.integers(2000, 12001))
    rows = n_normal + e
    phis = 1 - 10 ** rng.uniform(-3, -2, size=5)
    z = np.column_stack([ar1(rng, rows, 1, ph)[:, 0] for ph in phis])  # (the same draws as a 1-D series)
    z[:, 1] = 0.8 * z[:, 0] + 0.6 * z[:, 1]
    noise = z * SD
    x = LEVEL + noise
    unit = rsd(noise)
    clean = x.copy()
    t = np.arange(e)
    trans = max(1, int(rng.uniform(0.1, 0.5) * e))
    m = float(kind.lstrip("abcdefghijklmnopqrstuvwxyz"))
    if kind.startswith("step"):
        shape, sensors = np.ones(e), [(0, 1.0)]
    elif kind.startswith("ramp"):
        shape, sensors = np.minimum(t / trans, 1.0), [(0, 1.0)]
    elif kind.startswith("shift"):
        shape, sensors = np.minimum(t / trans, 1.0), [(0, 1.0), (2, -1.0)]
    elif kind.startswith("slow"):
        shape, sensors = t / max(e - 1, 1), [(0, 1.0)]
    else:
        raise ValueError(kind)
    for j, sign in sensors:
        x[n_normal:, j] += sign * m * unit[j] * shape
    lab = np.zeros(rows, dtype=int)
    lab[n_normal:] = 1
    out = []
    for v, y in ((x, lab), (clean, np.zeros(rows, dtype=int))):
        df = pd.DataFrame(v, columns=NAMES)
        df["label"] = y
        out.append(df)
    return out[0], out[1], p, n_normal


def runs(mask):
    m = np.concatenate([[False], np.asarray(mask, dtype=bool), [False]])
    d = np.flatnonzero(np.diff(m.astype(int)))
    return list(zip(d[0::2], d[1::2] - 1))


def replay(binary, path, vpath, p):
    run_replay(binary, path, vpath, ["--min-records", str(p)])
    return pd.read_csv(vpath)["outlier"].to_numpy().astype(bool)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--binary", action="append", required=True)
    a.add_argument("--work", required=True)
    a.add_argument("--seeds", default="1-8")
    a.add_argument("--kinds", default=",".join(KINDS))
    a.add_argument("--results", default=None)
    o = a.parse_args()
    lo, _, hi = o.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    os.makedirs(o.work, exist_ok=True)
    res = []
    for kind in o.kinds.split(","):
        for seed in seeds:
            fault, clean, p, start = make(kind, seed)
            fpath, cpath = os.path.join(o.work, f"{kind}_s{seed}.csv"), os.path.join(o.work, f"{kind}_s{seed}_c.csv")
            fault.to_csv(fpath, index=False)
            clean.to_csv(cpath, index=False)
            for b in o.binary:
                vp = os.path.join(o.work, f"v_{os.path.basename(b)}.csv")
                fl = replay(b, fpath, vp, p)
                cf = replay(b, cpath, vp, p)
                ev = fl[start:]
                normal = fl[p:start]
                hit = np.flatnonzero(ev)
                r = {"build": os.path.basename(b), "kind": kind, "seed": seed, "probation": p,
                     "start": start, "rows": len(fl), "found": bool(len(hit)),
                     "delay": int(hit[0]) if len(hit) else None, "event_share": float(ev.mean()),
                     "false_events": len(runs(normal)), "normal_share": float(normal.mean()),
                     "clean_share": float(cf[p:].mean()), "clean_runs": len(runs(cf[p:]))}
                res.append(r)
                print(json.dumps(r), flush=True)
                if o.results:
                    with open(o.results, "a") as fh:
                        fh.write(json.dumps(r) + "\n")
            os.remove(fpath)
            os.remove(cpath)
    summarise(pd.DataFrame(res))


def summarise(df):
    """One row per build: found per kind (of the seeds), all found, false events, clean twin."""
    kinds = list(dict.fromkeys(df["kind"]))
    print("| build | " + " | ".join(kinds) + " | found | delay med | false events (normal rows flagged) "
          "| clean twin: rows flagged med / max, runs |")
    print("|---" * (len(kinds) + 5) + "|")
    for b, g in df.groupby("build", sort=False):
        cells = [f"{int(g[g.kind == k].found.sum())}/{int((g.kind == k).sum())}" for k in kinds]
        d = g["delay"].dropna()
        print(f"| {b} | " + " | ".join(cells) + f" | **{int(g.found.sum())}/{len(g)}** | "
              f"{int(d.median()) if len(d) else '-'} | {int(g.false_events.sum())} "
              f"({100 * g.normal_share.mean():.3f} %) | {100 * g.clean_share.median():.3f} % / "
              f"{100 * g.clean_share.max():.3f} %, {int(g.clean_runs.sum())} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--summary":
        rows = [json.loads(line) for f in sys.argv[2:] for line in open(f)]
        summarise(pd.DataFrame(rows))
    else:
        main()
