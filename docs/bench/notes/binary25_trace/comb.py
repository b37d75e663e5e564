import sys, os, re, numpy as np, pandas as pd
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import unseen
from sklearn.metrics import average_precision_score as APs
R=[]
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    if not re.match(r"q\d", sid): continue
    p=len(tr); v=pd.read_csv(f"{sid}.v.csv").iloc[p:]
    cd=v.dens.to_numpy(); cx=v.dist.to_numpy()
    a=[APs(y,v.score.to_numpy()), APs(y,cd), APs(y,cx), APs(y,cd+cx), APs(y, pd.Series(cd).rank().to_numpy()+pd.Series(cx).rank().to_numpy())]
    R.append(a); print(sid, " ".join(f"{x:.3f}" for x in a))
print("mean", " ".join(f"{x:.3f}" for x in np.mean(R,0)))
