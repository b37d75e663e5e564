# unseen.py's caches: main's (bda18c3 build, written by tail26 16:18-16:45Z, the older of that window's pair) against cand2's (written since 16:57Z)
import glob, os, numpy as np, collections, datetime as dt
d = os.path.expanduser("~/.cache/outlierd/unseen")
ep = lambda s: dt.datetime.strptime("2026-11-28 " + s, "%Y-%m-%d %H:%M").replace(tzinfo=dt.timezone.utc).timestamp()
a0, a1, b0 = ep("16:18"), ep("16:45"), ep("16:57")
by = collections.defaultdict(list)
for f in glob.glob(d + "/*-ours-*.npz"):
    by[os.path.basename(f).rsplit("-ours-", 1)[0]].append((os.path.getmtime(f), f))
n = diff_s = 0
for sid, fs in sorted(by.items()):
    fs.sort()
    old = [f for m, f in fs if a0 <= m <= a1]
    new = [f for m, f in fs if m >= b0]
    if not old or not new: continue
    a, b = np.load(old[0]), np.load(new[-1])
    sa, sb, fa, fb = a["S:outlierd"], b["S:outlierd"], a["F:outlierd"], b["F:outlierd"]
    if len(sa) != len(sb): print(sid, "length differs"); continue
    dif = ~((sa == sb) | (np.isnan(sa) & np.isnan(sb)))
    n += 1
    if dif.any() or (fa != fb).any():
        diff_s += 1
        print(f"{sid}: rows {len(sa)} scores differ {int(dif.sum())} flags differ {int((fa!=fb).sum())} max main {np.nanmax(sa):.1f} cand2 {np.nanmax(sb):.1f}")
print("series compared", n, "differing", diff_s)
