#!/usr/bin/env python3
"""The table of probe_targets.py's results (JSON lines), per family and protocol.

T2/T3: the share of the scored rows of the clean (or drifting) stream flagged, median / max
over the seeds. T1 pools the three spike variants (pos_temp, mixed, exact20): recall min,
precision median / min, AP median / min, and the oracle's (the generator's own robust z) AP min.
  python docs/bench/probe_summary.py results.jsonl
"""
import json
import sys

import pandas as pd

rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith("{")]
d = pd.DataFrame(rows)
if "config" in d:
    d = d[d.config.fillna("") == ""]  # the targets: default config only

pct = lambda x: f"{100 * x:.3f} %"  # noqa: E731
f3 = lambda x: f"{x:.3f}"  # noqa: E731

print("| family | rows scored | protocol | clean/drift flagged med / max | spike recall min | "
      "precision med / min | AP med / min | oracle AP min | T1 | T2 / T3 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (fam, proto), g in d.groupby(["family", "proto"], sort=False):
    c = g[g.variant == "clean"]
    drift = fam.startswith("drift")
    lim = 0.01 if drift else 0.001
    t23 = ("pass" if c.share.max() <= lim else "**fail**") + (" (T3)" if drift else " (T2)")
    n = int(c.rows.iloc[0])  # the rows scored: after the probation
    cells = [fam, f"{n:,}", proto, f"{pct(c.share.median())} / {pct(c.share.max())}"]
    s = g[g.variant != "clean"]
    if s.empty:
        cells += ["", "", "", "", ""]
    else:
        ok = s.recall.min() >= 1 and s.precision.min() >= 0.9 and s.ap.min() >= 0.95
        prec = s.precision.fillna(0)  # nothing flagged: precision 0 for the target
        cells += [f3(s.recall.min()), f"{f3(prec.median())} / {f3(prec.min())}",
                  f"{f3(s.ap.median())} / {f3(s.ap.min())}", f3(s.oracle_ap.min()),
                  "pass" if ok else "**fail**"]
    cells.append(t23)
    print("| " + " | ".join(cells) + " |")
