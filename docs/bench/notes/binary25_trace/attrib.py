import sys, os, re, numpy as np, pandas as pd
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import unseen
cols = list(pd.read_csv(os.path.expanduser("~/.cache/outlierd/unseen10/eds/q0.5to0_5.csv"), nrows=1).drop(columns=["time","class"]).columns)
def spreadOf(s):
    n=len(s); iqr=s[(3*(n-1))//4]-s[(n-1)//4]
    if iqr>0: return iqr
    if s[-1]>s[0]:
        med=s[(n-1)//2]; return np.mean(np.abs(s-med))/0.7979*1.349
    return 1.0
def beyond(u,base): return np.where(u<=base,u,base+np.log1p(np.maximum(u-base,0)))
def surpr(s, x, spread):
    n=len(s); base=np.log(n)
    le=np.searchsorted(s,x,'right'); lt=np.searchsorted(s,x,'left'); ge=n-lt
    out=base-np.log(np.maximum(np.minimum(le,ge),1))
    lo=x<s[0]; hi=x>s[-1]
    out=np.where(lo, base-np.log(np.maximum(le,1))+beyond((s[0]-x)/spread,base), out)
    out=np.where(hi, base-np.log(np.maximum(ge,1))+beyond((x-s[-1])/spread,base), out)
    return out
def unit(s):
    n=len(s); lo=s[int(0.005*(n-1))]; hi=s[int(np.ceil(0.995*(n-1)))]
    sd=np.clip(s,lo,hi).std(); return sd if sd>0 else 1.0, s[(n-1)//2]
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    if not re.match(sys.argv[1], sid): continue
    tr=tr.astype(np.float32).astype(np.float64); te=te.astype(np.float32).astype(np.float64)
    ya=y.astype(bool)
    S=np.zeros(te.shape); Z=np.zeros(te.shape)
    for j in range(te.shape[1]):
        s=np.sort(tr[:,j]); sp=spreadOf(s); u,c=unit(s)
        S[:,j]=surpr(s,te[:,j],sp); Z[:,j]=((te[:,j]-c)/u)**2
    print(f"== {sid}: train {len(tr)}, test normal {(~ya).sum()}, attack {ya.sum()}; total density normal/attack median {np.median(S[~ya].sum(1)) if (~ya).any() else 0:.1f}/{np.median(S[ya].sum(1)):.1f}; |z|^2 to centre {np.median(Z[~ya].sum(1)) if (~ya).any() else 0:.3g}/{np.median(Z[ya].sum(1)):.3g}")
    dm=S[ya].mean(0)-(S[~ya].mean(0) if (~ya).any() else 0)
    for j in np.argsort(-np.abs(S[ya].mean(0))-np.abs(S[~ya].mean(0) if (~ya).any() else 0))[:8]:
        s=np.sort(tr[:,j]); nv=len(np.unique(s))
        print(f"  {cols[j]:22s} nvals {nv:4d} spread {spreadOf(s):9.3g} unit {unit(s)[0]:9.3g}  dens normal {S[~ya,j].mean() if (~ya).any() else 0:6.2f} attack {S[ya,j].mean():6.2f}   z2 normal {np.median(Z[~ya,j]) if (~ya).any() else 0:9.3g} attack {np.median(Z[ya,j]):9.3g}")
