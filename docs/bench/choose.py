#!/usr/bin/env python3
"""Chooses the detect stage's default combine rule, eta = delta and n from the raw lines that
cmd/benchcombine writes (-raw FILE), robustly across sets: every (rule, eta, n/W) is ranked by
its mean F1 over the sets (each set counts once: its window and uncertainty variants are
averaged first), and a leave-one-set-out check says how much F1 a set loses when the setting is
chosen without it, compared with the best setting for that set.

    python3 docs/bench/choose.py /tmp/combine.jsonl [--top 15] [--uncertainty none|derived|all]
"""
import argparse
import collections
import json
import statistics
import sys


def key(r):
    # density alone does not depend on n, distance alone not on eta.
    eta = None if r["rule"] == "distance" else r["eta"]
    nf = None if r["rule"] == "density" else r["nfrac"]
    return (r["rule"], eta, nf)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--uncertainty", default="all")
    ap.add_argument("--exclude", default="", help="comma-separated sets to leave out")
    ap.add_argument("--markdown", action="store_true", help="print the per-set F1 table of docs/BENCHMARKS.md instead")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.raw)]
    ex = set(filter(None, a.exclude.split(",")))
    rows = [r for r in rows if r["set"] not in ex and (a.uncertainty == "all" or r["uncertainty"] == a.uncertainty or r["set"] == "sensors")]
    # A set that labels no outlier has no F1 to rank on (cmd/benchcombine writes it null where
    # nothing is flagged, as precision and recall where undefined; 0 where anything is): left out.
    unlabelled = sorted({r["set"] for r in rows if r["tp"] + r["fn"] == 0})
    if unlabelled:
        print(f"left out, no outlier labelled (F1 undefined): {', '.join(unlabelled)}", file=sys.stderr)
        rows = [r for r in rows if r["set"] not in unlabelled]
    # f1[set][config] = mean over the set's variants (window x uncertainty)
    acc = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        acc[r["set"]][key(r)].append(r["f1"])
    sets = sorted(acc)
    configs = set.intersection(*(set(acc[s]) for s in sets))
    f1 = {s: {c: statistics.mean(acc[s][c]) for c in configs} for s in sets}
    rank = sorted(configs, key=lambda c: -statistics.mean(f1[s][c] for s in sets))
    if a.markdown:
        markdown(sets, f1, rank)
        return
    fmt = lambda c: f"{c[0]:8s} eta={'—' if c[1] is None else c[1]:<5} n/W={'—' if c[2] is None else c[2]:<6}"
    print(f"sets: {', '.join(sets)}  (uncertainty: {a.uncertainty})")
    print(f"{'setting':36s} mean F1  min F1  " + "  ".join(f"{s[:10]:>10s}" for s in sets))
    for c in rank[: a.top]:
        vals = [f1[s][c] for s in sets]
        print(f"{fmt(c):36s} {statistics.mean(vals):7.3f} {min(vals):7.3f}  " + "  ".join(f"{v:10.3f}" for v in vals))
    if len(sets) < 2:
        return
    print("\nleave one set out: the setting chosen on the others, its F1 on the held-out set, and that set's best")
    for s in sets:
        others = [t for t in sets if t != s]
        c = max(configs, key=lambda c: statistics.mean(f1[t][c] for t in others))
        best = max(configs, key=lambda c: f1[s][c])
        print(f"  {s:12s} chosen {fmt(c)}  F1 {f1[s][c]:.3f}   best {fmt(best)} F1 {f1[s][best]:.3f}")


def markdown(sets, f1, rank):
    """Per-set F1 (mean over the set's window and uncertainty variants) of the chosen default,
    the paper's thresholds, each rule alone, and the set's own best setting."""
    cols = [("any", 0.2, 0.001), ("any", 0.5, 0.001), ("density", 0.2, None), ("distance", None, 0.001),
            ("all", 0.2, 0.02), ("any", 0.05, 0.001)]
    name = lambda c: c[0] + ("" if c[1] is None else f" eta={c[1]}") + ("" if c[2] is None else f" n/W={c[2]}")
    print("| set | " + " | ".join(name(c) for c in cols) + " | the set's best (setting) |")
    print("|---|" + "---|" * (len(cols) + 1))
    for s in sets + ["mean"]:
        if s == "mean":
            vals = [statistics.mean(f1[t][c] for t in sets) for c in cols]
            b = rank[0]
            bv = statistics.mean(f1[t][b] for t in sets)
        else:
            vals = [f1[s][c] for c in cols]
            b = max(f1[s], key=lambda c: f1[s][c])
            bv = f1[s][b]
        print(f"| {s} | " + " | ".join(f"{v:.3f}" for v in vals) + f" | {bv:.3f} ({name(b)}) |")


if __name__ == "__main__":
    main()
