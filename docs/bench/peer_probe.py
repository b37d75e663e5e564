#!/usr/bin/env python3
"""Why two peers misbehaved, measured (docs/BENCHMARKS.md §12.32): PyOD's PCA on windows with
constant columns, and River's HalfSpaceTrees on 3W.

    python3 docs/bench/peer_probe.py --pca smap,msl,smd8,asd,tep,3w   # about 30 s on 2 cores
    python3 docs/bench/peer_probe.py --hst                            # 3W: about 20 s
    python3 docs/bench/peer_probe.py --check                          # MendedPCA's checks: 2 s

--pca: for each set of unseen.py, the refit windows of stream_sbs.py's sliding protocol (fit on
the previous min(W_FIT, i) rows every B_FIT rows): how many hold a constant column, how many of
the mended fit's windows have no varying column or a rank below their varying columns, and how
many test rows get no finite score from PyOD's PCA as first run (PCA(random_state=0) on the whole
window) and from stream_sbs.MendedPCA; and in how many series the two are identical.

--check: MendedPCA on generated windows, exit status 1 on a failure: a window with a constant
column, with a repeated column, with no varying column, and a full-rank one (scored exactly as
PyOD's defaults score it): finite scores and no numerically zero eigenvalue kept. It also shows
PyOD's PCA as first run on the first two (a smallest explained-variance ratio of 0 or about 1e-17,
which it divides by: infinite scores, or finite ones of order 1e16 that the noise orders).

--hst: on 3W's 13 instances (unseen.py's protocol), HST's ROC AUC on the test rows (mean over the
instances) as stream_sbs.hst runs it (an online MinMaxScaler, River's docs' pipeline), with the
scale frozen at the probation's min and max instead (River's other documented route, `limits`
known in advance: the probation's range mapped to HST's default [0, 1]), and frozen with no
learning after the probation (not a streaming detector: a diagnostic of what learning does); and,
as run, the AUC of the event's first 250 rows against the normal test rows and the mean score of
the event's rows by their distance from its start.
"""
import argparse
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stream_sbs as sbs  # noqa: E402
import unseen  # noqa: E402


def sets():
    return {"smap": lambda a: unseen.smap_msl(a.smap_msl, "SMAP"), "msl": lambda a: unseen.smap_msl(a.smap_msl, "MSL"),
            "smd8": lambda a: unseen.interfusion(a.interfusion, "machine-"), "asd": lambda a: unseen.interfusion(a.interfusion, "omi-"),
            "tep": lambda a: unseen.tep(a.tep), "3w": lambda a: unseen.threew(a.threew)}


def probe_pca(args):
    import numpy as np
    from pyod.models.pca import PCA

    first = sbs.refitted(lambda: PCA(random_state=0))
    for name in args.pca.split(","):
        t0 = time.time()
        c = dict(series=0, same=0, windows=0, const=0, none=0, cut=0, rows=0, inf_first=0, inf_mended=0)
        for _, train, test, _, _ in sets()[name](args):
            X, p = np.vstack([train, test]), max(len(train), 2)
            i = p
            while i < len(X):
                m = sbs.MendedPCA().fit(X[max(0, i - sbs.W_FIT):i])
                c["windows"] += 1
                c["const"] += int(not m.keep_.all())
                c["none"] += int(m.model_ is None)
                c["cut"] += int(m.model_ is not None and m.model_.n_components is not None)
                i += sbs.B_FIT
            s0, f0 = first(X, p)
            s1, f1 = sbs.pca(X, p)
            c["series"] += 1
            c["same"] += int(np.array_equal(s0, s1, equal_nan=True) and np.array_equal(f0, f1))
            c["rows"] += len(test)
            c["inf_first"] += int((~np.isfinite(s0[len(train):])).sum())
            c["inf_mended"] += int((~np.isfinite(s1[len(train):])).sum())
        print(f"{name}: {c['series']} series, {c['windows']} refit windows: {c['const']} with a constant column, "
              f"{c['none']} with no column varying, {c['cut']} of lower rank than their varying columns; test rows without a finite "
              f"score: PyOD's PCA as first run {c['inf_first']} of {c['rows']}, mended {c['inf_mended']}; "
              f"series scored identically {c['same']} ({time.time() - t0:.0f} s)", flush=True)


def hst_variant(X, p, mode):
    import numpy as np
    from river import anomaly, compose, preprocessing

    names = [f"x{j}" for j in range(X.shape[1])]
    if mode == "online":
        model, Z = compose.Pipeline(preprocessing.MinMaxScaler(), anomaly.HalfSpaceTrees(seed=42)), X
    else:
        lo, hi = X[:p].min(0), X[:p].max(0)
        Z = (X - lo) / np.where(hi > lo, hi - lo, 1.0)
        model = anomaly.HalfSpaceTrees(seed=42)
    s = np.empty(len(X))
    for i, row in enumerate(Z):
        x = dict(zip(names, row.tolist()))
        s[i] = model.score_one(x)
        if mode != "frozen, no learning after the probation" or i < p:
            model.learn_one(x)
    return s


def probe_hst(args):
    import numpy as np
    from sklearn.metrics import roc_auc_score

    modes = ("online", "frozen", "frozen, no learning after the probation")
    auc = {m: [] for m in modes}
    early, by_age, nan = [], {k: [] for k in (0, 250, 500, 1000)}, 0
    for sid, train, test, y, _ in unseen.threew(args.threew):
        X, p = np.vstack([train, test]), len(train)
        nan += int(np.isnan(X).sum())
        for m in modes:
            auc[m].append(roc_auc_score(y, hst_variant(X, p, m)[p:]))
        s = sbs.hst(X)[0][p:]
        a, normal = int(np.argmax(y)), s[y == 0]
        ev = s[a:a + 250]
        early.append(roc_auc_score(np.r_[np.zeros(len(normal)), np.ones(len(ev))], np.r_[normal, ev]))
        for k in by_age:
            if a + k + 250 <= len(s):
                by_age[k].append(s[a + k:a + k + 250].mean() - normal.mean())
    print(f"3W: {len(early)} instances, {nan} NaN cells in the rows the detectors see")
    for m in modes:
        print(f"HST, scale {m}: ROC AUC mean {np.mean(auc[m]):.3f}")
    print(f"HST as run: the event's first 250 rows against the normal test rows, ROC AUC mean {np.mean(early):.3f}; "
          "the event's mean score minus the normal rows', by rows since its start: "
          + ", ".join(f"{k}-{k + 249}: {np.mean(v):+.2f} ({len(v)} instances)" for k, v in by_age.items()))


def check():
    import numpy as np
    from pyod.models.pca import PCA

    rng = np.random.default_rng(7)
    base = rng.normal(size=(2000, 4))
    windows = {"a constant column": np.column_stack([base, np.full(2000, 3.0)]),
               "a repeated column": np.column_stack([base, base[:, 1]]),
               "full rank": base}
    nxt = rng.normal(size=(500, 4))
    failed = []
    for what, w in windows.items():
        X = np.column_stack([nxt, w[:500, 4:]]) if w.shape[1] > 4 else nxt
        p0 = PCA(random_state=0).fit(w)
        first, ratio = p0.decision_function(X), p0.explained_variance_ratio_.min()
        m = sbs.MendedPCA().fit(w)
        s = m.decision_function(X)
        ok = np.isfinite(s).all() and np.isfinite(m.threshold_) and m.model_.explained_variance_ratio_.min() > 1e-12
        if what == "full rank":
            ok = ok and np.array_equal(s, first) and m.model_.n_components is None
        elif ratio > 1e-12:  # the defect: a numerically zero eigenvalue that PyOD divides by
            print(f"check: PyOD's PCA on a window with {what}: its smallest ratio is {ratio:.3g}, not numerically zero")
        print(f"check: {what}: PyOD's PCA smallest ratio {ratio:.3g}, finite rows {int(np.isfinite(first).sum())} of {len(X)}, "
              f"largest finite score {np.max(first[np.isfinite(first)], initial=0):.3g}; mended: finite rows "
              f"{int(np.isfinite(s).sum())}, components {m.model_.n_components_} of {w.shape[1]} columns, largest "
              f"score {s.max():.3g}: {'ok' if ok else 'FAILED'}")
        if not ok:
            failed.append(what)
    m = sbs.MendedPCA().fit(np.ones((100, 3)))
    s = m.decision_function(rng.normal(size=(10, 3)))
    ok = m.model_ is None and (s == 0).all() and not (s > m.threshold_).any()
    print(f"check: no varying column: scores 0, no flag: {'ok' if ok else 'FAILED'}")
    if not ok:
        failed.append("no varying column")
    if failed:
        raise SystemExit(f"peer_probe: check failed: {', '.join(failed)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pca", default="", help="sets of unseen.py (comma-separated)")
    ap.add_argument("--hst", action="store_true", help="HST on 3W")
    ap.add_argument("--check", action="store_true", help="MendedPCA's checks (exit status 1 on a failure)")
    ap.add_argument("--smap-msl", default=os.environ.get("OUTLIERD_SMAP_MSL", unseen.SMAP_MSL_DEFAULT))
    ap.add_argument("--interfusion", default=os.environ.get("OUTLIERD_INTERFUSION", unseen.INTERFUSION_DEFAULT))
    ap.add_argument("--tep", default=os.environ.get("OUTLIERD_TEP", unseen.TEP_DEFAULT))
    ap.add_argument("--threew", default=os.environ.get("OUTLIERD_3W", unseen.THREEW_DEFAULT))
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    if args.check:
        check()
    if args.pca:
        probe_pca(args)
    if args.hst:
        probe_hst(args)


if __name__ == "__main__":
    sbs.ensure_venv(__file__)
    main()
