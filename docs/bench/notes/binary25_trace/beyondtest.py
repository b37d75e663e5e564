import sys, os, re, numpy as np, pandas as pd
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import unseen
from sklearn.metrics import average_precision_score as APs
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "attrib.py")).read().split("for sid, tr")[0])
cols = list(pd.read_csv(os.path.expanduser("~/.cache/outlierd/unseen10/eds/q0.5to0_5.csv"), nrows=1).drop(columns=["time","class"]).columns)
def dist_knn(trz, tez, k=10):
    # exact k-NN mean distance of each test row to the probation rows (w_k approx: sum of k distances)
    out=np.empty(len(tez))
    for i in range(0,len(tez),256):
        d=np.sqrt(((tez[i:i+256,None,:]-trz[None,:,:])**2).sum(-1)); d.sort(1); out[i:i+256]=d[:,:k].sum(1)
    return out
res=[]
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    if not re.match(r"q\d", sid): continue
    tr=tr.astype(np.float32).astype(np.float64); te=te.astype(np.float32).astype(np.float64)
    S=np.zeros(te.shape); Sc=np.zeros(te.shape); trz=np.zeros(tr.shape); tez=np.zeros(te.shape); tez2=np.zeros(te.shape); trz2=np.zeros(tr.shape)
    for j in range(te.shape[1]):
        s=np.sort(tr[:,j]); sp=spreadOf(s); u,c=unit(s); n=len(s)
        S[:,j]=surpr(s,te[:,j],sp); Sc[:,j]=np.minimum(S[:,j], np.log(n))
        trz[:,j]=(tr[:,j]-c)/u; tez[:,j]=(te[:,j]-c)/u
    a=[APs(y,S.sum(1)), APs(y,Sc.sum(1)), APs(y,dist_knn(trz,tez))]
    res.append(a)
    print(f"{sid}: static probation model: density AP {a[0]:.3f}; density capped at ln n (no extrapolation) {a[1]:.3f}; k-NN (k=10, sum) in the standardised space {a[2]:.3f}")
print("mean", np.mean(res,0).round(3))
