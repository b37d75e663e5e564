import sys, os, re, numpy as np, pandas as pd
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import unseen
from sklearn.metrics import average_precision_score as APs
from pyod.models.ecod import ECOD
cols = list(pd.read_csv(os.path.expanduser("~/.cache/outlierd/unseen10/eds/q0.5to0_5.csv"), nrows=1).drop(columns=["time","class"]).columns)
binary = {c for c in cols if re.search(r"Solenoid|Pump|Ind$|Switch|Start$|Alarm|Stop|sys", c)}
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    if not re.match(r"q\d", sid): continue
    nv = [len(np.unique(tr[:, j])) for j in range(tr.shape[1])]
    const = [cols[j] for j in range(len(nv)) if nv[j] == 1]
    few = [cols[j] for j in range(len(nv)) if 1 < nv[j] <= 3]
    m = ECOD(); m.fit(tr); s = m.decision_function(te)
    print(f"{sid}: train {len(tr)}; constant in probation {len(const)} ({sum(c in binary for c in const)} two-state tags, others: {[c for c in const if c not in binary]}); 2-3 values {len(few)} {few}; ECOD fit once on probation AP {APs(y, s):.3f}")
