# young31b: SKAB's 34 files replayed by both binaries as stream_sbs.py replays them (young31_trace/skab_files.py's, the binaries /tmp/young31b's), verdict files compared byte for byte, the candidate's release line.
import sys, os, subprocess, json, filecmp
sys.path.insert(0, "/work/wt/young31b/docs/bench")
import numpy as np
import stream_sbs as sbs
W = "/tmp/young31b/w/skabdiag"; os.makedirs(W, exist_ok=True)
for rel, df, win in sbs.skab_corpus(os.path.expanduser("~/.cache/outlierd/skab"), False):
    n = len(df); p = max(sbs.nab_probation(n), 2)
    y = np.zeros(n, dtype=int)
    for a, b in win:
        y[((df["timestamp"] >= a) & (df["timestamp"] <= b)).to_numpy()] = 1
    feats = [c for c in df.columns if c != "timestamp"]
    path = os.path.join(W, "in.csv")
    df[feats].assign(label=y).to_csv(path, index=False)
    res, rl = {}, ""
    for arm, b in (("main", "/tmp/young31b/main/outlierd"), ("y31b", "/tmp/young31b/y31b")):
        v = os.path.join(W, arm + ".csv")
        out = subprocess.run([b, "replay", "--input", path, "--label-column", "label", "--min-records", str(p), "--verdicts-out", v, "--json"], capture_output=True, text=True)
        res[arm] = json.loads(out.stdout)
        if arm == "y31b":
            rl = " | ".join(l[l.find("young31b"):][:160] for l in out.stderr.splitlines() if "young31b" in l)
    same = filecmp.cmp(os.path.join(W, "main.csv"), os.path.join(W, "y31b.csv"), shallow=False)
    print(f"{rel:16s} rows {n:5d} P {p:3d} flagged main {res['main']['flagged']:4d} y31b {res['y31b']['flagged']:4d} verdicts {'identical' if same else 'DIFFER'}  {rl}", flush=True)
