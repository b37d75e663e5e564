#!/usr/bin/env python3
"""Leave-one-set-out choice of the ranking settings and the alarm rate, with outlierd replay.

    python3 docs/bench/sweep.py [--data DIR] [--max-rows 20000] > /tmp/sweep.md

Runs `outlierd replay` (only ours; the peers do not depend on these settings) on every labelled
set for a grid of settings:
  score: detect.score.detectors x score.k x score.sample x score.combine, batch (window = the whole file);
         objective: mean over the sets of (ROC AUC + average precision) / 2 of the combined score;
  rate:  detect.alarm_rate, stream (W 5000, min_records 2000, refresh 2500; file order and a
         fixed shuffle, sets of more than 5000 rows) with the chosen score settings;
         objective: mean F1 of the flags.
For each set left out, the other sets choose the setting with the best mean objective; the
report says which setting each choice gave and how the left-out set scores under it, so the
defaults are not tuned to the sets at hand (docs/BENCHMARKS.md §8).
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sidebyside as sbs  # noqa: E402


def run_grid(binary, sets, args, settings, mode):
    """objective[setting][set] for every setting (a dict of detect keys)."""
    import numpy as np

    out = {}
    with tempfile.TemporaryDirectory() as td:
        data = {}
        for name, path in sets:
            df, X, y, _ = sbs.load(path, args.max_rows)
            runs = []
            if mode == "batch":
                runs.append(("batch", np.arange(len(y))))
            elif len(y) > 5000:
                runs += [("file", np.arange(len(y))), ("shuffled", np.random.default_rng(1).permutation(len(y)))]
            for run, order in runs:
                p = os.path.join(td, f"{name}-{run}.csv")
                df.iloc[order].to_csv(p, index=False)
                data.setdefault(name, []).append((run, p, y[order]))
        for st in settings:
            key = json.dumps(st, sort_keys=True)
            cfg = os.path.join(td, "c.yaml")
            with open(cfg, "w") as f:
                f.write("detect:\n")
                nested = {}
                for k, v in st.items():
                    if "." in k:
                        a, b = k.split(".")
                        nested.setdefault(a, []).append(f"    {b}: {v}\n")
                    else:
                        f.write(f"  {k}: {v}\n")
                for a, lines in nested.items():
                    f.write(f"  {a}:\n" + "".join(lines))
            args.config = cfg
            out[key] = {}
            for name, runs in data.items():
                vals = []
                for run, p, y in runs:
                    if run == "batch":
                        res, score, flags = sbs.replay(binary, p, args, window=len(y) + 1, min_records=len(y))  # (the batch case whatever the config writes)
                        m = sbs.metrics(score, y, int(flags.sum()))
                        vals.append((m["roc_auc"] + m["ap"]) / 2)
                    else:
                        res, score, flags = sbs.replay(binary, p, args, 5000, 2000, 2500)
                        vals.append(float(res["f1"] or 0.0))  # (null: no flag and no outlier labelled)
                out[key][name] = sum(vals) / len(vals)
            print(f"# {mode} {key}: mean {sum(out[key].values()) / len(out[key]):.4f}", file=sys.stderr)
    return out


def loo(table):
    """For each set: the setting the others choose, and the left-out set's objective under it."""
    sets = sorted(next(iter(table.values())).keys())
    rows = []
    for left in sets:
        best = max(table, key=lambda k: sum(v for s, v in table[k].items() if s != left))
        own = max(table, key=lambda k: table[k][left])
        rows.append((left, best, table[best][left], own, table[own][left]))
    return rows


def report(title, table):
    allbest = max(table, key=lambda k: sum(table[k].values()))
    print(f"\n### {title}\n")
    print(f"All sets choose {allbest} (mean {sum(table[allbest].values()) / len(table[allbest]):.4f}).\n")
    print("| left out | the others choose | its objective there | its own best | objective |")
    print("|---|---|---|---|---|")
    for left, best, v, own, ov in loo(table):
        print(f"| {left} | {best} | {v:.4f} | {own} | {ov:.4f} |")
    print("\nEvery setting (mean objective over the sets):\n")
    for k in sorted(table, key=lambda k: -sum(table[k].values())):
        print(f"- {k}: {sum(table[k].values()) / len(table[k]):.4f} (" + ", ".join(f"{s} {v:.3f}" for s, v in sorted(table[k].items())) + ")")
    return allbest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(sbs.ROOT, "..", "shared", "data"))
    ap.add_argument("--sets", default="")
    ap.add_argument("--max-rows", type=int, default=20000)
    ap.add_argument("--detectors", default="both,density,distance")
    ap.add_argument("--k", default="20,50,100")
    ap.add_argument("--sample", default="2048")
    ap.add_argument("--combine", default="mean,max")
    ap.add_argument("--rates", default="0.002,0.005,0.01,0.02,0.05")
    ap.add_argument("--no-rates", action="store_true", help="only the score settings")
    args = ap.parse_args()
    args.config = ""
    sets = sbs.labelled_sets(args.data, set(filter(None, args.sets.split(","))))
    binary = os.path.join(sbs.ROOT, "bin", "outlierd")
    subprocess.check_call(["go", "build", "-o", binary, "./cmd/outlierd"], cwd=sbs.ROOT)
    grid = []
    for d, k, s, c in itertools.product(args.detectors.split(","), args.k.split(","), args.sample.split(","), args.combine.split(",")):
        st = {"score.detectors": d, "score.k": int(k), "score.sample": int(s), "score.combine": c}
        if d == "density":  # k, sample and combine do not change the density score
            st = {"score.detectors": d}
        elif d == "distance":
            del st["score.combine"]
        if st not in grid:
            grid.append(st)
    score = run_grid(binary, sets, args, grid, "batch")
    chosen = json.loads(report("score settings (batch; objective (ROC AUC + AP) / 2)", score))
    if args.no_rates:
        return
    rates = [dict(chosen, alarm_rate=float(r)) for r in args.rates.split(",")]
    rate = run_grid(binary, sets, args, rates, "stream")
    report("alarm rate (stream, file order and shuffled; objective F1)", rate)


if __name__ == "__main__":
    sbs.ensure_venv(__file__)
    main()
