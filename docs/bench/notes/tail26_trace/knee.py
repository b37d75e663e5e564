import sys, os, subprocess, numpy as np, pandas as pd
sys.argv=sys.argv[:1]; sys.path.insert(0,".")
import unseen
BIN="/tmp/tail26/trace-outlierd"
tot=np.zeros(5,int)
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    X=np.vstack([tr,te]); p=len(tr); lab=np.concatenate([np.zeros(p,int),y])
    csv=f"/tmp/tail26/t/k.csv"
    pd.DataFrame(X,columns=[f"x{j}" for j in range(X.shape[1])]).assign(label=lab).to_csv(csv,index=False)
    out={}
    for tag,env in (("cal",{"B25CAL":"1"}),("mean",{"B25CAL":"1","T26MEAN":"1"})):
        v=f"/tmp/tail26/t/k.{tag}.v.csv"
        subprocess.run([BIN,"replay","--input",csv,"--label-column","label","--min-records",str(max(p,2)),"--verdicts-out",v,"--json"],capture_output=True,text=True,env=dict(os.environ,**env))
        vv=pd.read_csv(v,keep_default_na=False)
        out[tag]=(pd.to_numeric(vv.dens,errors="coerce").to_numpy()[p:],pd.to_numeric(vv.dist,errors="coerce").to_numpy()[p:])
    kc=out["cal"][1]; ratio=out["mean"][1]
    within=ratio<=1; past=ratio>10; mid=(ratio>1)&(ratio<=10)
    c=[len(kc), int(np.sum(within&(kc>20))), int(np.sum(within&(kc>100))), int(np.sum(mid&(kc>100))), int(np.sum(past))]
    tot+=np.array(c)
    if c[1] or c[3]:
        print(sid, "rows", c[0], "within largest & dist cal>20:", c[1], ">100:", c[2], "| 1-10x largest & >100:", c[3], "| past 10x:", c[4], "max dist cal within largest %.0f" % (np.nanmax(np.where(within,kc,np.nan)) if within.any() else 0))
print("EDS total rows", tot[0], "within largest & >20 decades", tot[1], ">100", tot[2], "| 1-10x & >100", tot[3], "| past 10x", tot[4])
