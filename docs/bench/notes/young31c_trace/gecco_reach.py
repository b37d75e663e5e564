# young31c, after the verdict: the 34 test-half rows main flags and young31c does not, against
# each column's reach read (offline, as youngOf reads it) from the train rows (the first model's
# window; later models' windows also hold test rows, so this is the first model's view only),
# and how much of each column's reach the train half's labelled events make.
import sys, os, tempfile
sys.path.insert(0, "/work/wt/young31c/docs/bench")
import numpy as np, pandas as pd
import unseen
df = pd.read_csv(os.path.join(unseen.GECCO2017_DEFAULT, "data.csv")); half = len(df) // 2
with tempfile.TemporaryDirectory() as td:
    p = os.path.join(td, "t.csv"); df.iloc[:half].to_csv(p, index=False); Xtr, ytr = unseen.gecco_rows(p)
ytr = np.asarray(ytr).astype(bool)
v = {a: pd.read_csv(f"/tmp/young31c/w/gecco_{a}.csv") for a in ("main", "cand")}
X = pd.read_csv("/tmp/young31c/w/gecco.csv").drop(columns="label").to_numpy(float)
fm = (v["main"]["outlier"].astype(str).str.lower() == "true").to_numpy(); fc = (v["cand"]["outlier"].astype(str).str.lower() == "true").to_numpy()
lost = np.flatnonzero(fm & ~fc); lost = lost[lost >= len(Xtr)]
med = np.nanmedian(Xtr, 0); sd = 1.4826 * np.nanmedian(np.abs(Xtr - med), 0)
z = np.abs(Xtr - med) / sd
reach = np.nanmax(z, 0); reach_clean = np.nanmax(z[~ytr], 0)
print("column reach (train window, all rows):      ", np.round(reach, 1))
print("column reach (train window, events left out):", np.round(reach_clean, 1))
zl = np.abs(X[lost] - med) / sd
print("lost rows", len(lost), "; max over columns of z / reach: within", int((np.nanmax(zl / reach, 1) <= 1).sum()),
      "; beyond the events-free reach:", int((np.nanmax(zl / reach_clean, 1) > 1).sum()))
