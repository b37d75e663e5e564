import sys, os, glob, numpy as np, datetime as dt
sys.argv = ["x"]; sys.path.insert(0, ".")
import unseen
from sklearn.metrics import average_precision_score as ap
ep = lambda s: dt.datetime.strptime("2026-11-28 " + s, "%Y-%m-%d %H:%M").replace(tzinfo=dt.timezone.utc).timestamp()
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    fs = sorted((os.path.getmtime(f), f) for f in glob.glob(os.path.expanduser(f"~/.cache/outlierd/unseen/{sid}-ours-*.npz")))
    old = [f for m, f in fs if ep("16:18") <= m <= ep("16:45")]; new = [f for m, f in fs if m >= ep("16:57")]
    if not old or not new: continue
    a, b = np.load(old[0])["S:outlierd"], np.load(new[-1])["S:outlierd"]
    if not np.array_equal(a, b, equal_nan=True):
        print(f"{sid}: AP main {ap(y, np.nan_to_num(a)):.4f} cand2 {ap(y, np.nan_to_num(b)):.4f}")
