#!/usr/bin/env python3
"""Tables of probe_targets.py's results (JSON lines): per family and protocol, median and worst."""
import json
import sys

import pandas as pd

rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith("{")]
d = pd.DataFrame(rows)


def fmt(x, pct=False):
    return f"{100 * x:.3f} %" if pct else f"{x:.3f}"


out = []
for (fam, proto), g in d.groupby(["family", "proto"], sort=False):
    c = g[g.variant == "clean"]
    line = {"family": fam, "proto": proto, "seeds": c.seed.nunique()}
    if fam.startswith("drift"):
        line["T3 flagged (med / max)"] = f"{fmt(c.share.median(), 1)} / {fmt(c.share.max(), 1)}"
        line["T3"] = "pass" if c.share.max() <= 0.01 else "**FAIL**"
    else:
        line["T2 flagged (med / max)"] = f"{fmt(c.share.median(), 1)} / {fmt(c.share.max(), 1)}"
        ok2 = c.share.max() <= 0.001
        for var in ("pos_temp", "mixed", "exact20"):
            s = g[g.variant == var]
            if s.empty:
                continue
            line[f"{var} recall min"] = fmt(s.recall.min())
            line[f"{var} P med / min"] = f"{fmt(s.precision.median())} / {fmt(s.precision.min())}"
            line[f"{var} AP med / min (oracle min)"] = (
                f"{fmt(s.ap.median())} / {fmt(s.ap.min())} ({fmt(s.oracle_ap.min())})")
        sp = g[g.variant != "clean"]
        ok1 = (sp.recall.min() >= 1) and (sp.precision.min() >= 0.9) and (sp.ap.min() >= 0.95)
        line["T1"] = "pass" if ok1 else "**FAIL**"
        line["T2"] = "pass" if ok2 else "**FAIL**"
    out.append(line)
t = pd.DataFrame(out).fillna("")
cols = list(t.columns)
print("| " + " | ".join(cols) + " |")
print("|" + "---|" * len(cols))
for _, r in t.iterrows():
    print("| " + " | ".join(str(r[c]) for c in cols) + " |")
