import numpy as np, glob
from scipy.stats import rankdata
def load(f):
    x=np.fromfile(f,dtype='<f8'); n=len(x)//2; return x[:n],x[n:]
def conf(x,y,t,wide):
    n=len(x); ox=np.sort(x); oy=np.sort(y)
    tx=ox[n-t]; ty=oy[n-wide]
    return (((x>=tx)&(y>=ty)).sum()+1)/((x>=tx).sum()+1)
def weights(ca,cb,rho,G=4,F=0.2):
    e=G*max(rho,0); pa,pb=ca**e,cb**e
    return min(max(pa/(pa+pb),F),1-F)
def cands(a,b):
    n=len(a); top=max(int(np.ceil(0.01*n)),20)
    rho=np.corrcoef(rankdata(a),rankdata(b))[0,1]
    out={}
    out['main']=weights(conf(a,b,top,10*top),conf(b,a,top,10*top),rho)
    # max over top sizes
    for K in [2,4,8]:
        ts=[top*m for m in [1,2,4,8] if m<=K and 10*top*m<n]
        out[f'max{K}']=weights(max(conf(a,b,t,10*t) for t in ts),max(conf(b,a,t,10*t) for t in ts),rho)
    # mean over sizes
    ts=[top*m for m in [1,2,4] if 10*top*m<n]
    out['mean4']=weights(np.mean([conf(a,b,t,10*t) for t in ts]),np.mean([conf(b,a,t,10*t) for t in ts]),rho)
    return out
rows=[]
for d in sorted(glob.glob('dump/*')):
    fs=sorted(glob.glob(d+"/b*.bin"))[:6]
    if not fs: continue
    res=[cands(*load(f)) for f in fs]
    keys=res[0].keys()
    print(f"{d[5:]:18s}", ' | '.join(f"{k} "+' '.join(f"{r[k]:.2f}" for r in res[:3]) for k in keys))
