# young31c, after the verdict (from young31b_trace/gecco_diag.py): GECCO2017 as unseen.py replays it (its split, probation = the train rows), both binaries; the candidate's young31 log lines.
import sys, os, subprocess, json
sys.path.insert(0, "/work/wt/young31c/docs/bench")
import numpy as np, pandas as pd
import unseen
(sid, tr, te, y, segs), = list(unseen.gecco2017(unseen.GECCO2017_DEFAULT))
X = np.vstack([tr, te]); lab = np.concatenate([np.zeros(len(tr), int), y])
df = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])]); df["label"] = lab
p = "/tmp/young31c/w/gecco.csv"; df.to_csv(p, index=False)
print("rows", len(df), "train", len(tr), "test", len(te))
for arm, b in (("main", "/tmp/young31c/main/outlierd"), ("y31b", "/tmp/young31b/y31b"), ("cand", "/tmp/young31c/y31c")):
    out = subprocess.run([b, "replay", "--input", p, "--label-column", "label", "--min-records", str(min(len(tr), 50000)), "--verdicts-out", f"/tmp/young31c/w/gecco_{arm}.csv", "--json"], capture_output=True, text=True)
    js = json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}
    print(arm, "flagged", js.get("flagged"), "models", js.get("models_built"), "rc", out.returncode)
    for l in out.stderr.splitlines():
        if "young31" in l or "error" in l.lower():
            print("   ", l[:300])
v = {a: pd.read_csv(f"/tmp/young31c/w/gecco_{a}.csv") for a in ("main", "cand")}
fm = v["main"]["outlier"].astype(str).str.lower() == "true"; fc = v["cand"]["outlier"].astype(str).str.lower() == "true"
idx = np.flatnonzero(fm.to_numpy() != fc.to_numpy())
print("rows differing", len(idx), "first/last", idx[:5], idx[-5:], "test starts at", len(tr))
v["y31b"] = pd.read_csv("/tmp/young31c/w/gecco_y31b.csv")
fb = v["y31b"]["outlier"].astype(str).str.lower() == "true"
for a, fa, b, fb_ in (("main", fm, "y31b", fb), ("main", fm, "cand", fc), ("y31b", fb, "cand", fc)):
    d1, d2 = np.flatnonzero(fa & ~fb_), np.flatnonzero(fb_ & ~fa)
    print(f"{a} not {b}: {len(d1)} ({(d1 >= len(tr)).sum()} in the test half); {b} not {a}: {len(d2)} ({(d2 >= len(tr)).sum()} in the test half)")
lost = np.flatnonzero(fm & ~fc)
print("main not cand, labelled abnormal:", int(lab[lost].sum()), "of", len(lost), "rows", lost[:8], "...")
