import glob, re, numpy as np, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import unseen
from sklearn.metrics import average_precision_score as APs
C = os.path.expanduser("~/.cache/outlierd/unseen")
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    if not re.match(r"q\d", sid): continue
    out = {}
    for kind in ("ours", "peers"):
        for f in glob.glob(f"{C}/{sid}-{kind}-*.npz"):
            z = np.load(f)
            for k in z.files:
                if k.startswith("S:"):
                    s = np.nan_to_num(z[k], nan=-1e300)
                    if len(s) == len(y): out[k[2:]] = APs(y, s)
    print(sid, " ".join(f"{k} {v:.3f}" for k, v in sorted(out.items())))
