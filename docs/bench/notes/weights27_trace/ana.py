import numpy as np, glob, json, sys
from scipy.stats import rankdata
def load(f):
    x=np.fromfile(f,dtype='<f8'); n=len(x)//2; return x[:n],x[n:]
def w_main(a,b,TQ=0.01,CT=20,G=4,F=0.2):
    n=len(a); top=max(int(np.ceil(TQ*n)),CT)
    oa=np.sort(a); ob=np.sort(b)
    ka=oa[n-top]; kb=ob[n-top]; Ka=oa[n-10*top]; Kb=ob[n-10*top]
    ca=(((a>=ka)&(b>=Kb)).sum()+1)/((a>=ka).sum()+1)
    cb=(((b>=kb)&(a>=Ka)).sum()+1)/((b>=kb).sum()+1)
    rho=np.corrcoef(rankdata(a),rankdata(b))[0,1]
    e=G*max(rho,0); pa,pb=ca**e,cb**e
    return min(max(pa/(pa+pb),F),1-F),ca,cb,rho
files=sorted(glob.glob('dump/tab_*/b*.bin'))+[sorted(glob.glob(d+'/b*.bin'))[0] for d in sorted(glob.glob('dump/[!t]*'))]
for f in files:
    a,b=load(f); n=len(a); top=max(int(np.ceil(0.01*n)),20)
    wa,ca,cb,rho=w_main(a,b)
    pa=rankdata(a)/n; pb=rankdata(b)/n
    Tb=np.argsort(-b)[:top]; Ta=np.argsort(-a)[:top]
    print(f"{f:32s} n={n} wd={wa:.2f} cd={ca:.2f} ck={cb:.2f} rho={rho:.2f} | dens pct of dist-top: q10 {np.quantile(pa[Tb],.1):.3f} med {np.median(pa[Tb]):.3f} | dist pct of dens-top: q10 {np.quantile(pb[Ta],.1):.3f} med {np.median(pb[Ta]):.3f} | b p99/p90 {np.quantile(b,.99)/np.quantile(b,.9):.2f} a p99/p90 {np.quantile(a,.99)/np.quantile(a,.9):.2f}")
