import sys, os, subprocess, re, numpy as np, pandas as pd
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import unseen
from sklearn.metrics import average_precision_score as APs
BIN = os.environ.get("BIN", "/tmp/b25trace/outlierd")
only = sys.argv[1] if len(sys.argv) > 1 else "q"
cols = list(pd.read_csv(os.path.expanduser("~/.cache/outlierd/unseen10/eds/q0.5to0_5.csv"), nrows=1).drop(columns=["time","class"]).columns)
rows = []
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    if not re.match(only, sid): continue
    X = np.vstack([tr, te]); p = len(tr)
    lab = np.concatenate([np.zeros(p, int), y])
    csv = f"/tmp/b25/{sid}.csv"; v = f"/tmp/b25/{sid}.v.csv"
    pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])]).assign(label=lab).to_csv(csv, index=False)
    r = subprocess.run([BIN, "replay", "--input", csv, "--label-column", "label", "--min-records", str(max(p,2)), "--verdicts-out", v, "--json"],
                       capture_output=True, text=True, env=dict(os.environ, B25TRACE="1"))
    builds = [l for l in r.stderr.splitlines() if l.startswith("B25 build")]
    vv = pd.read_csv(v, keep_default_na=False)
    s = pd.to_numeric(vv.score, errors="coerce").to_numpy()[p:]
    d = pd.to_numeric(vv.dens, errors="coerce").to_numpy()[p:]
    k = pd.to_numeric(vv.dist, errors="coerce").to_numpy()[p:]
    ya = y.astype(bool)
    # changed tags: attack rows' values never seen in train (or frequency shift)
    A = te[ya]; N = np.vstack([tr, te[~ya]])
    chg = []
    for j in range(X.shape[1]):
        nv = set(np.unique(tr[:, j]))
        fa = np.mean(~np.isin(A[:, j], list(nv)))
        ma, mn = A[:, j].mean(), tr[:, j].mean()
        if fa > 0.05 or (len(nv) <= 3 and abs(ma - mn) > 0.3):
            chg.append(f"{cols[j]}(new {fa:.2f}, nvals {len(nv)}, train mean {mn:.3g}, attack mean {ma:.3g})")
    w = [re.search(r"wdens=(\S+) wdist=(\S+)", b).groups() for b in builds]
    print(f"{sid}: test {len(y)} abn {ya.mean():.2f} AP comb {APs(ya,s):.3f} dens {APs(ya,np.nan_to_num(d)):.3f} dist {APs(ya,np.nan_to_num(k)):.3f}; builds {len(builds)} weights first {w[0] if w else None} last {w[-1] if w else None}")
    print("   changed:", "; ".join(chg))
    print("   median dens attack/normal %.2f/%.2f  dist attack/normal %.3g/%.3g" % (np.nanmedian(d[ya]), np.nanmedian(d[~ya]) if (~ya).any() else np.nan, np.nanmedian(k[ya]), np.nanmedian(k[~ya]) if (~ya).any() else np.nan))
    open(f"/tmp/b25/{sid}.builds", "w").write(r.stderr)
