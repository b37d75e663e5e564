# young30c's prediction: the first model's window against its correlation time (robust tau_hat, young30's estimator), per series
import sys, os, numpy as np
sys.path.insert(0, "/work/wt/young30c/docs/bench")
import unseen
def tau_max(X):
    t = 0.0
    for c in X.T.astype(np.float32).astype(np.float64):
        c = c[~np.isnan(c)]
        if len(c) < 3: continue
        med = np.median(c); mad = np.median(np.abs(c - med))
        d = np.abs(np.diff(c)); d = d[d > 0]
        if len(d) < 2 or not mad > 0: continue
        r = np.median(d) / (np.sqrt(2) * mad); rho = min(max(1 - r * r, 0), 1 - 1e-12)
        if rho >= 0.5: t = max(t, (1 + rho) / (1 - rho))
    return t
def report(name, src):
    rows = []
    for sid, X, p, y in src:
        X = np.asarray(X, dtype=float); n = len(X)
        t0 = tau_max(X[:p]); t1 = tau_max(X)
        rows.append((sid, p, n, t0, t1))
        print(f"{name} {sid} train {p} all {n} tau_hat(train) {t0:.0f} p/tau {p/max(t0,1e-9):.1f} tau_hat(all) {t1:.0f} n/tau {n/max(t1,1e-9):.1f} -> {'no auto col' if t0==0 else ('mature at train' if p>=10*t0 else ('mature by end' if n>=10*t1 else 'waits to the end, immature'))}")
    sys.stdout.flush()
C = os.path.expanduser("~/.cache/outlierd")
def wrap(g):
    for sid, tr, te, y, segs in g:
        yield sid, np.vstack([tr, te]), len(tr), y
if __name__ == "__main__":
  report("TEP", wrap(unseen.tep(C + "/tep")))
  report("SMAP", wrap(unseen.smap_msl(C + "/smap_msl", "SMAP")))
  report("MSL", wrap(unseen.smap_msl(C + "/smap_msl", "MSL")))
  report("SMD8", wrap(unseen.interfusion(C + "/interfusion", "machine-")))
  report("ASD", wrap(unseen.interfusion(C + "/interfusion", "omi-")))
