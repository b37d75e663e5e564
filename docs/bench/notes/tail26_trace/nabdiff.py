import json, os, sys, subprocess, math
import pandas as pd, numpy as np
nab = os.path.expanduser("~/.cache/outlierd/nab")
with open(os.path.join(nab, "labels", "combined_windows.json")) as fh:
    windows = json.load(fh)
def run(b, path, p):
    v = f"/tmp/tail26/nab/v_{os.path.basename(b)}.csv"
    subprocess.run([b, "replay", "--input", path, "--label-column", "label", "--min-records", str(p), "--verdicts-out", v, "--json"], capture_output=True, check=True)
    return pd.read_csv(v, keep_default_na=False)
tot = {}
for rel in sorted(windows):
    df = pd.read_csv(os.path.join(nab, "data", rel), header=0, parse_dates=[0])
    n = len(df); p = max(int(min(math.floor(0.15 * n), 0.15 * 5000)), 2)
    y = np.zeros(n, dtype=int)
    for a, b in windows[rel]:
        y[((df["timestamp"] >= pd.Timestamp(a)) & (df["timestamp"] <= pd.Timestamp(b))).to_numpy()] = 1
    path = "/tmp/tail26/nab/nab.csv"
    df[[c for c in df.columns if c != "timestamp"]].assign(label=y).to_csv(path, index=False)
    m = run("/tmp/tail26/main-outlierd", path, p); c = run("/tmp/tail26/cand-outlierd", path, p)
    fm = m["outlier"].astype(str).str.lower().eq("true"); fc = c["outlier"].astype(str).str.lower().eq("true")
    sm = pd.to_numeric(m["score"], errors="coerce"); sc = pd.to_numeric(c["score"], errors="coerce")
    d = (sm != sc) & ~(sm.isna() & sc.isna())
    if d.any() or (fm != fc).any():
        idx = np.where(fm != fc)[0]
        print(rel, n, "scores differ", int(d.sum()), "flags", int(fm.sum()), "->", int(fc.sum()), "changed rows", list(idx[:8]),
              "main scores", [round(float(sm[i]),2) for i in idx[:5]], "cand", [round(float(sc[i]),2) for i in idx[:5]],
              "dist", [m["distance"][i] if "distance" in m.columns else None for i in idx[:3]], "label", [int(y[i]) for i in idx[:5]])
        sys.stdout.flush()
