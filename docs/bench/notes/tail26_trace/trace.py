import sys, os, subprocess, re, numpy as np, pandas as pd
sys.argv=sys.argv[:2]; sys.path.insert(0,".")
import unseen
from sklearn.metrics import average_precision_score as APs
BIN="/tmp/tail26/trace-outlierd"
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    if sid not in sys.argv[1].split(","): continue
    X=np.vstack([tr,te]); p=len(tr); lab=np.concatenate([np.zeros(p,int),y])
    csv=f"/tmp/tail26/t/{sid}.csv"
    pd.DataFrame(X,columns=[f"x{j}" for j in range(X.shape[1])]).assign(label=lab).to_csv(csv,index=False)
    out={}
    for tag,env in (("cal",{"B25CAL":"1"}),("lin",{"B25CAL":"1","T26LIN":"1"}),("mean",{"B25CAL":"1","T26MEAN":"1"}),("meanlin",{"B25CAL":"1","T26MEAN":"1","T26LIN":"1"})):
        v=f"/tmp/tail26/t/{sid}.{tag}.v.csv"
        r=subprocess.run([BIN,"replay","--input",csv,"--label-column","label","--min-records",str(max(p,2)),"--verdicts-out",v,"--json"],capture_output=True,text=True,env=dict(os.environ,B25TRACE="1",**env))
        vv=pd.read_csv(v,keep_default_na=False)
        out[tag]=(pd.to_numeric(vv.score,errors="coerce").to_numpy()[p:],pd.to_numeric(vv.dens,errors="coerce").to_numpy()[p:],pd.to_numeric(vv.dist,errors="coerce").to_numpy()[p:])
        builds=[l for l in r.stderr.splitlines() if l.startswith("B25 build")]
    ya=np.asarray(y).astype(bool)
    s,dc,kc=out["cal"]; _,_,kl=out["lin"]; _,mean,ratio=out["mean"]; _,meanlin,_=out["meanlin"]
    print(f"{sid}: test {len(y)}, attack {ya.sum()}, builds {len(builds)}; AP cand {APs(ya,s):.3f}")
    for name,m in (("attack",ya),("normal",~ya)):
        idx=np.where(m)[0]
        top=idx[np.argsort(-s[idx])][:3]; med=idx[np.argsort(s[idx])][len(idx)//2]
        for i in list(top)+[med]:
            print(f"  {name} row {i}: score {s[i]:.1f} dens cal {dc[i]:.1f} dist cal {kc[i]:.1f} (linear {kl[i]:.1f}) mean {mean[i]:.1f} (linear {meanlin[i]:.1f}) dist/top {ratio[i]:.2f}")
