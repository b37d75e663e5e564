# label-free: per set, test rows whose knee lift inside a calibration's range exceeds 10 decades (trace build's score)
import glob, os, numpy as np
d = os.path.expanduser("~/.cache/outlierd/unseen")
times = [l.split() for l in open("/tmp/tail26b/lift/times") if len(l.split()) == 2]
spans = {}
for k, t in times:
    if k.endswith("-end"): spans[k[:-4]][1] = float(t)
    else: spans[k] = [float(t), None]
files = [(os.path.getmtime(f), f) for f in glob.glob(d + "/*-ours-*.npz")]
for s, (a, b) in spans.items():
    if b is None: continue
    fs = [f for m, f in files if a - 1 <= m <= b + 1]
    rows = over10 = over20 = over100 = 0; mx = 0.0; series = 0; hit = 0
    for f in fs:
        z = np.load(f); v = np.asarray(z["S:outlierd"], float)
        rows += len(v); c = int(np.nansum(v > 10)); over10 += c; over20 += int(np.nansum(v > 20)); over100 += int(np.nansum(v > 100))
        series += 1; hit += c > 0
        if len(v) and np.isfinite(v).any(): mx = max(mx, float(np.nanmax(v)))
    print(f"{s:10s} series {series:4d} test rows {rows:8d}  lift>10: {over10:6d} ({100*over10/max(rows,1):.2f}%) in {hit} series  >20: {over20:6d}  >100: {over100:6d}  max {mx:.1f}")
