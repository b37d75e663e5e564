# young31b stage 1 items 1-3 from the two probe_targets.py result files (main, candidate).
import json, sys
def load(f):
    return {(r["family"], r["variant"], r["proto"], r["seed"]): r for r in map(json.loads, open(f)) if r.get("config", "") == ""}
m, c = load(sys.argv[1]), load(sys.argv[2])
AR = ("ar09", "ar099", "ar099_100k", "ar0999_100k")
print(f"rows: main {len(m)} cand {len(c)}; missing in cand: {sorted(set(m) - set(c))[:5]}")
bad = []
for k in sorted(m):
    if k not in c: continue
    fam, var, proto, seed = k
    a, b = m[k], c[k]
    if var == "clean":
        lim = 0.001 * b["rows"]
        if fam in AR and b["flagged"] > lim: bad.append(("item1 T2", k, b["flagged"]))
        if fam not in AR and a["flagged"] <= 0.001 * a["rows"] and b["flagged"] > lim: bad.append(("item3 T2", k, a["flagged"], b["flagged"]))
    else:
        if b["recall"] < a["recall"]: bad.append(("recall", k, a["recall"], b["recall"]))
        if b["ap"] < a["ap"] - 0.01: bad.append(("AP", k, a["ap"], b["ap"]))
    if a["flagged"] != b["flagged"]:
        print("moved", k, a["flagged"], "->", b["flagged"], f"(after window {a.get('share_after_window', 0):.5f} -> {b.get('share_after_window', 0):.5f})")
print("failures:", bad if bad else "none")
