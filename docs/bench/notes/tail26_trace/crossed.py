import glob, os, numpy as np, time, collections, re
d = os.path.expanduser("~/.cache/outlierd/unseen")
t0 = time.mktime(time.strptime("2026-11-28 16:28", "%Y-%m-%d %H:%M"))
by = collections.defaultdict(list)
for f in glob.glob(d + "/*-ours-*.npz"):
    m = os.path.getmtime(f)
    if m >= t0 - 3600*0:  # this session
        by[f.rsplit("-ours-", 1)[0]].append((m, f))
tot = collections.Counter(); n = 0
for sid, fs in sorted(by.items()):
    if len(fs) != 2:
        continue
    fs.sort()
    a, b = [np.load(f) for _, f in fs]
    sa, sb = a["S:outlierd"], b["S:outlierd"]
    fa, fb = a["F:outlierd"], b["F:outlierd"]
    diff = int(np.sum(~((sa == sb) | (np.isnan(sa) & np.isnan(sb)))))
    fl = int(np.sum(fa != fb))
    if diff or fl:
        print(os.path.basename(sid), len(sa), "scores differ", diff, "flags differ", fl, "max main %.1f cand %.1f" % (np.nanmax(sa), np.nanmax(sb)))
    n += 1
print("series compared", n)
