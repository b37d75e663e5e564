# young30c, after the verdict: SKAB files against the candidate's maturity (tau.py's estimator), the probation stream_sbs.py gives
import sys, os, numpy as np
sys.path.insert(0, "/work/wt/young30c/docs/bench")
import stream_sbs as sbs
from tau import tau_max
cnt = {}
for name, df, win in sbs.skab_corpus(os.path.expanduser("~/.cache/outlierd/skab"), False):
    X = df.drop(columns=["timestamp"]).to_numpy(dtype=float); n = len(X); p = max(sbs.nab_probation(n), 2)
    t0, t1 = tau_max(X[:p]), tau_max(X)
    v = 'no auto col' if t0 == 0 else ('mature at probation' if p >= 10 * t0 else ('mature by end' if n >= 10 * t1 else 'waits to the end, immature'))
    cnt[v] = cnt.get(v, 0) + 1
    print(f"SKAB {name} probation {p} rows {n} tau_hat(probation) {t0:.0f} tau_hat(all) {t1:.0f} -> {v}")
print(cnt)
