"""young29b, after the verdict: SMAP's AP per series, switch unset and set, from unseen.py's cache
of the stage-2 runs (no replay: a series not cached for both binaries is an error).
Usage: ~/.cache/outlierd/bench-venv/bin/python docs/bench/notes/young29b_trace/diag_smap.py OFF_BIN Y_BIN"""
import hashlib, os, sys
import numpy as np
from sklearn.metrics import average_precision_score

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import unseen  # noqa: E402


def bhash(p):
    with open(p, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()[:16]


off, yb = sys.argv[1], sys.argv[2]
cache = os.path.expanduser("~/.cache/outlierd/unseen")
rows = []
for sid, train, test, y, segs in unseen.smap_msl(unseen.SMAP_MSL_DEFAULT, "SMAP"):
    a, _ = unseen.series_outputs(sid, train, test, y, "/nonexistent", bhash(off), "", cache)
    b, _ = unseen.series_outputs(sid, train, test, y, "/nonexistent", bhash(yb), "", cache)
    const = int(sum(np.nanmax(train[:, j]) == np.nanmin(train[:, j]) for j in range(train.shape[1])))
    rows.append((sid, len(train), const, average_precision_score(y, a["outlierd"][0]), average_precision_score(y, b["outlierd"][0]),
                 int(a["outlierd"][1].sum()), int(b["outlierd"][1].sum())))
rows.sort(key=lambda r: r[4] - r[3])
print("series | train rows | constant train columns | AP off | AP y29b | flags off | flags y29b")
for r in rows:
    if abs(r[4] - r[3]) > 0.005 or r[5] != r[6]:
        print(f"{r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.3f} | {r[5]} | {r[6]}")
d = np.array([r[4] - r[3] for r in rows])
print(f"{len(rows)} series; AP mean off {np.mean([r[3] for r in rows]):.3f}, y29b {np.mean([r[4] for r in rows]):.3f}; "
      f"changed by more than 0.005: {int((abs(d) > 0.005).sum())} (down {int((d < -0.005).sum())}, up {int((d > 0.005).sum())})")
