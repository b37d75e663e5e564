import sys, os, re, numpy as np, pandas as pd
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import unseen
ta=fa=tn=fn=0
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    if not re.match(r"q\d", sid): continue
    v=pd.read_csv(f"{sid}.v.csv").iloc[len(tr):]; f=v.outlier.astype(str).str.lower().eq("true").to_numpy(); ya=y.astype(bool)
    print(sid, f"attack rows flagged {f[ya].mean():.3f}, normal test rows flagged {f[~ya].mean() if (~ya).any() else float('nan'):.3f}")
    ta+=f[ya].sum(); fa+=ya.sum(); tn+=f[~ya].sum(); fn+=(~ya).sum()
print(f"family: attack rows flagged {ta}/{fa} = {ta/fa:.3f}; normal test rows flagged {tn}/{fn} = {tn/fn:.3f}")
