"""young29's estimator (young29.go's youngOf) on the real sets' training parts, after the verdict:
which columns read as autocorrelated, tau_max, and how many columns have a zero MAD (E = +Inf:
no discount for any record of such a model). Run with the bench venv's python."""
import glob, os, pickle
import numpy as np

def cols(a):
    out = []
    for j in range(a.shape[1]):
        c = a[:, j]; med = np.median(c); mad = np.median(abs(c - med))
        if mad <= 0:
            out.append("zero"); continue
        d = abs(np.diff(c)); d = d[d > 0]
        if len(d) < 2:
            out.append(None); continue
        r = np.median(d) / (np.sqrt(2) * mad); rho = min(max(1 - r * r, 0), 1 - 1e-12)
        out.append((1 + rho) / (1 - rho) if rho >= 0.5 else None)
    return out

def line(name, a):
    c = cols(a); t = [x for x in c if isinstance(x, float)]
    z = sum(1 for x in c if x == "zero")
    tm = max(t) if t else 0
    print(f"{name}: {a.shape[0]} rows x {a.shape[1]}; autocorrelated {len(t)}, tau_max {tm:.0f}, "
          f"young while rows < {20 * tm:.0f}; zero-MAD columns {z}")

C = os.path.expanduser("~/.cache/outlierd")
a = np.loadtxt(f"{C}/tep/d00.dat"); a = a.T if a.shape[0] == 52 else a
line("TEP d00 (the 500-row probation)", a)
for f in sorted(glob.glob(f"{C}/interfusion/*_train.pkl")):
    line(os.path.basename(f), np.asarray(pickle.load(open(f, "rb")), dtype=float))
s = [cols(np.load(f)) for f in sorted(glob.glob(f"{C}/smap_msl/train/*.npy"))]
print(f"SMAP/MSL train: {len(s)} series, with a zero-MAD column {sum(1 for c in s if 'zero' in c)}")
