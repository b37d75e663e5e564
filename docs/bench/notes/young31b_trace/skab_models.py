# young31b, after the verdict: models built per SKAB file (replay's models_built), both binaries: a release by the judges installs J_B, J_A and a build (three more than the serving path).
import sys, os, subprocess, json
sys.path.insert(0, "/work/wt/young31b/docs/bench")
import numpy as np
import stream_sbs as sbs
W = "/tmp/young31b/w/skabdiag"
for rel, df, win in sbs.skab_corpus(os.path.expanduser("~/.cache/outlierd/skab"), False):
    if rel not in ("valve1/3.csv", "valve1/7.csv", "valve1/9.csv", "valve1/12.csv", "valve2/0.csv", "other/5.csv", "other/8.csv", "valve1/2.csv"):
        continue
    n = len(df); p = max(sbs.nab_probation(n), 2)
    y = np.zeros(n, dtype=int)
    for a, b in win:
        y[((df["timestamp"] >= a) & (df["timestamp"] <= b)).to_numpy()] = 1
    feats = [c for c in df.columns if c != "timestamp"]
    path = os.path.join(W, "in.csv"); df[feats].assign(label=y).to_csv(path, index=False)
    r = {}
    for arm, b in (("main", "/tmp/young31b/main/outlierd"), ("y31b", "/tmp/young31b/y31b")):
        out = subprocess.run([b, "replay", "--input", path, "--label-column", "label", "--min-records", str(p), "--json"], capture_output=True, text=True)
        r[arm] = json.loads(out.stdout)["models_built"]
    print(f"{rel:14s} models built main {r['main']} y31b {r['y31b']}", flush=True)
