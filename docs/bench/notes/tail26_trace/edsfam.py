import sys, os, glob, numpy as np
sys.argv = ["x"]
sys.path.insert(0, ".")
import unseen
from sklearn.metrics import average_precision_score as ap
root = os.path.expanduser("~/.cache/outlierd/unseen10/eds")
fam = {}
for sid, tr, te, y, segs in unseen.eds(root):
    fs = sorted(glob.glob(os.path.expanduser(f"~/.cache/outlierd/unseen/{sid}-ours-*.npz")), key=os.path.getmtime)[-2:]
    sm, sc = [np.load(f)["S:outlierd"] for f in fs]
    a, b = ap(y, np.nan_to_num(sm)), ap(y, np.nan_to_num(sc))
    k = sid.split("_")[0]
    g = "db" if k.startswith("db") else "iw" if k.startswith("iw") else "qw" if k.startswith("qw") else "q" if k.startswith("q") else "rest"
    fam.setdefault(g, []).append((a, b))
    if abs(a - b) > 0.005:
        print(f"{sid}: main {a:.3f} cand {b:.3f}")
for g, v in fam.items():
    v = np.array(v); print(g, len(v), "main %.3f cand %.3f" % tuple(v.mean(0)))
