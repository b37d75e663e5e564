# Post-verdict observation (chooses nothing): how much of a distance-top record's standardised
# squared norm its largest coordinate carries, top 1 % by a k-NN distance (k = 100, a 2,048-record
# reference), standardised as outlierd does (median, sd winsorised at 0.5/99.5 %).
import numpy as np, pandas as pd, sys
from sklearn.neighbors import NearestNeighbors
def stdz(X):
    lo,hi=np.quantile(X,0.005,axis=0),np.quantile(X,0.995,axis=0)
    C=np.clip(X,lo,hi); sd=C.std(axis=0); sd[sd==0]=1
    return (X-np.median(C,axis=0))/sd
def run(name,X):
    Z=stdz(X); rng=np.random.default_rng(0)
    ref=Z[rng.choice(len(Z),min(2048,len(Z)),replace=False)]
    d,_=NearestNeighbors(n_neighbors=101).fit(ref).kneighbors(Z)
    s=d[:,1:].sum(1); top=np.argsort(-s)[:max(int(0.01*len(Z)),20)]
    sq=Z[top]**2; share=sq.max(1)/sq.sum(1)
    print(f"{name:28s} n={len(Z)} d={Z.shape[1]} largest coordinate's share of the top 1 %'s squared norm: median {np.median(share):.2f}, 10th pct {np.quantile(share,.1):.2f}; feature carrying it: {np.bincount(sq.argmax(1),minlength=Z.shape[1]).tolist()}")
for n in ['mammography','shuttle','cardio']:
    df=pd.read_csv(f'/work/shared/data/{n}.csv'); X=df.drop(columns=['label']).to_numpy(float)
    if len(X)>20000: X=X[np.random.default_rng(1).choice(len(X),20000,replace=False)]
    run(n,X)
for s in [4,7]:
    df=pd.read_csv(f'spk{s}.csv').iloc[:5000]
    t=df.temp.to_numpy(); m16=pd.Series(t).rolling(16,min_periods=1).mean().to_numpy()
    X=np.c_[df.temp,df.pressure,df.humidity,m16]; run(f'mean16 seed {s}, rows 0-4999',X)
df=pd.read_csv('pstd4.csv').iloc[:5000]; run('plain std seed 4, rows 0-4999',df[['temp','pressure','humidity','tstd']].to_numpy(float))
