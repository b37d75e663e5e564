import numpy as np, pandas as pd
x = pd.read_csv("eq/shift.csv"); lab = x.label.values.astype(bool); idx = np.where(lab)[0]
starts = [idx[0]] + [idx[i] for i in range(1, len(idx)) if idx[i] != idx[i - 1] + 1]
for v in ["off", "cen"]:
    d = pd.read_csv(f"eq/shift_{v}.csv"); f, sc = d.outlier.values, d.score.values
    print(f"shift {v}: flags {f[2000:].sum()}", " | ".join(f"ep@{st}: {f[st:st+300].sum()}/300 med {np.median(sc[st:st+300]):.2f}" for st in starts))
