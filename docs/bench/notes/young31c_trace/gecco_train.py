# young31c's check before the stages (young31c_rule.md): GECCO2017's train half only, its own
# first half the probation, its second half scored; the challenge's F1 of the flags row by row.
import sys, os, subprocess, json, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import numpy as np, pandas as pd
import unseen
df = pd.read_csv(os.path.join(unseen.GECCO2017_DEFAULT, "data.csv"))
half = len(df) // 2
with tempfile.TemporaryDirectory() as td:
    p = os.path.join(td, "train.csv"); df.iloc[:half].to_csv(p, index=False)
    X, y = unseen.gecco_rows(p)
y = np.asarray(y).astype(int)
q = len(X) // 2
lab = np.concatenate([np.zeros(q, int), y[q:]])
d = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])]); d["label"] = lab
path = "/tmp/young31c/w/gecco_train.csv"; d.to_csv(path, index=False)
print("train-half rows", len(X), "probation", q, "scored", len(X) - q, "abnormal scored", int(y[q:].sum()), "abnormal in probation", int(y[:q].sum()))
flags = {}
for arm, b in (("main", "/tmp/young31c/main/outlierd"), ("young31b", "/tmp/young31b/y31b"), ("young31c", "/tmp/young31c/y31c")):
    out = subprocess.run([b, "replay", "--input", path, "--label-column", "label", "--min-records", str(min(q, 50000)), "--verdicts-out", f"/tmp/young31c/w/gt_{arm}.csv", "--json"], capture_output=True, text=True)
    v = pd.read_csv(f"/tmp/young31c/w/gt_{arm}.csv")
    f = (v["outlier"].astype(str).str.lower() == "true").to_numpy()
    flags[arm] = f
    fs, ys = f[q:], y[q:].astype(bool)
    tp, fp, fn = int((fs & ys).sum()), int((fs & ~ys).sum()), int((~fs & ys).sum())
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    js = json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}
    print(f"{arm}: rc {out.returncode} models {js.get('models_built')} flagged all {int(f.sum())} scored {int(fs.sum())} TP {tp} FP {fp} FN {fn} F1 {f1:.3f}")
for a, b in (("main", "young31b"), ("main", "young31c"), ("young31b", "young31c")):
    print(f"{a} not {b}: {int((flags[a] & ~flags[b]).sum())}; {b} not {a}: {int((flags[b] & ~flags[a]).sum())}")
