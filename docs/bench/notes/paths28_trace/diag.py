"""paths28 diagnosis (after the verdict): where the flags lie. Run in /tmp/paths28 after
probe_targets.py --keep (ar0999_100k clean asis seeds 1-3, into k_off/ and k_fwd/) and
`outlierd gen --kind sensors --rows 20000 --spike-rate 0 --shifts 4 --shift-size 6
--shift-length 300 --anomaly-sensor -1 --seed 3 --head 2000 > shift.csv` replayed with
--min-records 2000 --verdicts-out shift_{off,fwd}.csv (stream_sbs.py's `shift`)."""
import numpy as np
import pandas as pd

for s in [1, 2, 3]:
    for v in ["off", "fwd"]:
        d = pd.read_csv(f"k_{v}/ar0999_100k_clean_s{s}_asis.verdicts.csv")
        f = d.outlier.values
        seg = [int(f[i:i + 10000].sum()) for i in range(5000, 100000, 10000)]
        print(f"ar0999_100k s{s} {v}: flags {f[5000:].sum()}, after row 50,000 {100 * f[50000:].mean():.2f} %, per 10,000 rows from 5,000: {seg}")
x = pd.read_csv("shift.csv")
lab = x.label.values.astype(bool)
idx = np.where(lab)[0]
starts = [idx[0]] + [idx[i] for i in range(1, len(idx)) if idx[i] != idx[i - 1] + 1]
for v in ["off", "fwd"]:
    d = pd.read_csv(f"shift_{v}.csv")
    f, sc = d.outlier.values, d.score.values
    print(f"shift {v}: flags {f[2000:].sum()}")
    for st in starts:
        seg = slice(st, st + 300)
        print(f"  episode at row {st}: flagged {f[seg].sum()} of 300, score median {np.median(sc[seg]):.2f}, min {sc[seg].min():.2f}")
