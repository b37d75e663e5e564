#!/usr/bin/env python3
"""probe_targets.py's verdicts (T1, T2/T3) per family and protocol, one column a results file.

Cells: T1 and T2/T3 verdicts (as probe_summary.py pools them: T1 every spike flagged, precision
>= 0.9, AP >= 0.95 over the spike variants and seeds; T2 clean <= 0.1 %, T3 drift <= 1 %), then
false flags on the spiked streams + the clean stream, spikes missed, the least AP and precision,
the clean stream's largest share flagged. The last line: targets met by the first file and
failed by another (BENCHMARKS §12.50, sig23_rule.md).
  python docs/bench/probe_compare.py NAME=results.jsonl NAME=results.jsonl ...
"""
import json
import sys

import pandas as pd


def verdicts(path):
    d = pd.DataFrame([json.loads(l) for l in open(path) if l.startswith("{")])
    out = {}
    for (fam, proto), g in d.groupby(["family", "proto"], sort=False):
        c = g[g.variant == "clean"]
        lim = 0.01 if fam.startswith("drift") else 0.001
        t23 = bool(c.share.max() <= lim)
        s = g[g.variant != "clean"]
        cell = {"T2/3": t23, "clean_max": float(c.share.max()), "clean_fp": int(c.flagged.sum())}
        if not s.empty:
            prec = s.precision.fillna(0)
            cell.update(T1=bool(s.recall.min() >= 1 and prec.min() >= 0.9 and s.ap.min() >= 0.95),
                        fp=int((s.flagged - s.tp).sum()), missed=int((s.spikes - s.tp).sum()),
                        apmin=float(s.ap.min()), pmin=float(prec.min()))
        out[(fam, proto)] = cell
    return out


def text(c):
    v = lambda b: "pass" if b else "**fail**"  # noqa: E731
    t = f"T2/3 {v(c['T2/3'])}, clean max {100 * c['clean_max']:.3f} %"
    if "T1" in c:
        t = (f"T1 {v(c['T1'])}; FP {c['fp']}+{c['clean_fp']}, missed {c['missed']}, "
             f"P min {c['pmin']:.3f}, AP min {c['apmin']:.3f}; " + t)
    return t


def main():
    runs = [a.split("=", 1) for a in sys.argv[1:]]
    res = {n: verdicts(p) for n, p in runs}
    names = [n for n, _ in runs]
    print("| family | protocol | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for key in res[names[0]]:
        print(f"| {key[0]} | {key[1]} | " + " | ".join(text(res[n][key]) if key in res[n] else "" for n in names) + " |")
    base = res[names[0]]
    for n in names[1:]:
        lost = [f"{k[0]} {k[1]} {t}" for k, c in base.items() for t in ("T1", "T2/3")
                if c.get(t) and k in res[n] and not res[n][k].get(t)]
        print(f"\n{n}: targets {names[0]} meets and {n} fails: {len(lost)}" + (": " + "; ".join(lost) if lost else ""))


if __name__ == "__main__":
    sys.exit(main())
