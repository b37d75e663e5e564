# young31, after the verdict: SKAB's 34 files replayed by both binaries as stream_sbs.py replays
# them (its corpus, probation and CSV), the verdict files compared byte for byte; per file the
# flags of each and the candidate's hold (its Info log: the release line).
import sys, os, subprocess, json, filecmp
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import numpy as np
import stream_sbs as sbs
W = "/tmp/young31/skabdiag"
pred = {}
for l in open(os.path.join(os.path.dirname(__file__), "..", "young30c_trace", "skab_tau.txt")):
    if l.startswith("SKAB "):
        pred[l.split()[1]] = l.split("-> ")[1].strip()
for rel, df, win in sbs.skab_corpus(os.path.expanduser("~/.cache/outlierd/skab"), False):
    n = len(df); p = max(sbs.nab_probation(n), 2)
    y = np.zeros(n, dtype=int)
    for a, b in win:
        y[((df["timestamp"] >= a) & (df["timestamp"] <= b)).to_numpy()] = 1
    feats = [c for c in df.columns if c != "timestamp"]
    path = os.path.join(W, "in.csv")
    df[feats].assign(label=y).to_csv(path, index=False)
    res = {}
    for arm, b in (("main", "/tmp/young31/main/outlierd"), ("y31", "/tmp/young31/y31")):
        v = os.path.join(W, arm + ".csv")
        out = subprocess.run([b, "replay", "--input", path, "--label-column", "label", "--min-records", str(p), "--verdicts-out", v, "--json"], capture_output=True, text=True)
        res[arm] = json.loads(out.stdout)
    same = filecmp.cmp(os.path.join(W, "main.csv"), os.path.join(W, "y31.csv"), shallow=False)
    print(f"{rel:16s} rows {n:5d} P {p:3d} flagged main {res['main']['flagged']:4d} y31 {res['y31']['flagged']:4d} "
          f"verdicts {'identical' if same else 'DIFFER'}  (skab_tau: {pred.get(rel)})", flush=True)
