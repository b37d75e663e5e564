#!/usr/bin/env python3
"""Streaming side by side: `outlierd replay` against River, PyOD and a robust z-score on sensor streams.

    python3 docs/bench/stream_sbs.py                # everything (generated streams, then NAB)
    python3 docs/bench/stream_sbs.py --quick        # a subset: < 3 minutes on 2 cores
    python3 docs/bench/stream_sbs.py --markdown     # the tables of docs/BENCHMARKS.md §12
    python3 docs/bench/stream_sbs.py --sets gen --config my.yaml --replay-args "--window 5000"

It installs its peers itself (docs/bench/requirements.txt, into a virtual environment under
~/.cache/outlierd/bench-venv) and re-runs itself there; it builds bin/outlierd (go build).

Every detector sees the same rows in file order and scores each row before it learns from
it (no detector sees a row's future). The first P rows of a stream are its probationary
period: every detector may learn from them and none is scored on them.

  outlierd  `outlierd replay --input F --label-column label --min-records P --verdicts-out V
            --json` with the config of --config (default: none, i.e. pipeline.Default()) and
            --replay-args; its score and its own verdicts (flags) are read back from V.
  HST       River HalfSpaceTrees with River's defaults (10 trees, height 8, window 250,
            seed 42) after an online MinMaxScaler: score_one, then learn_one, row by row.
            Flags: River's QuantileFilter idea, the running 0.995 quantile of its past scores.
  IForest   PyOD IForest (100 trees, seed 0) and ECOD, refitted on a sliding window: at row
  ECOD      P and every B = 500 rows after, fit on the previous min(W, i) rows (W = 2000) and
            score the next B rows. Flags: PyOD's own threshold_ (contamination 0.1).
  MAD-z     rolling median/MAD robust z: max over features of 0.6745 |x - med| / MAD over the
            previous N = 500 rows (MAD 0: the mean absolute deviation / 0.7979; both 0 and
            x != med: z = 1e12). Flags: z > 3.5 (Iglewicz and Hoaglin's modified z rule).
  PCA       PyOD PCA (its defaults, seed 0), refitted as IForest and ECOD are, on each window's
            varying columns with as many components as the window's rank (MendedPCA: a
            constant or repeated column's zero eigenvalue made every PyOD score infinite).

On a fleet (a key column) the peers run per key (each key's rows in order, P counted in the
key's own rows for the sliding and rolling peers) and, like outlierd today, on the whole
stream ("global"); outlierd gets --key-column when its replay has that flag.

Metrics, on the rows after P: ROC AUC and average precision (AP) of each score; precision,
recall and F1 of each detector's own flags; F1 of every peer's top-n rows, n = outlierd's
flag count ("at equal flags"); and the share flagged (on the anomaly-free streams, the only
figure). NAB (the Numenta Anomaly Benchmark, --nab or $OUTLIERD_NAB): NAB's own scorer, i.e.
its nab/sweeper.py (imported from the NAB checkout and run as is) driven as nab/optimizer.py
and nab/runner.py's normalize() drive it: one threshold per detector and profile optimised
over the corpus, the sum of the files' scores at it, normalised to 100 * (raw - null) /
(perfect - null) with the null detector's raw score computed the same way. Scores enter NAB
as their dense rank over the corpus / the number of distinct scores (NAB's sweep depends only
on that order, ties included); outlierd's verdicts enter as a 0/1 detector of their own ("outlierd flags"). Point-wise
AP on NAB labels a row 1 inside a NAB window, after the probation (mean over the files with
a window). outlierd's `recent` column (detect.recent_scores: its combined score ranked among its
series' last scores) is reported as a detector of its own, "outlierd recent", with the same
flags (and "outlierd NAME recent" for each --also-config). SKAB (--sets skab, --skab or $OUTLIERD_SKAB): its 34 labelled experiments (8 sensors),
each anomalous span a window for the same driver of NAB's scorer, and SKAB's own outlier
figures (F1, FAR, MAR) of each detector's flags. --nab-files and --skab-files pick the
halves that chose a default or are reported on. See docs/bench/README.md for what chose
which parameter.
"""
import argparse
import warnings
import importlib.util
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
VENV = os.path.expanduser("~/.cache/outlierd/bench-venv")
REQUIREMENTS = os.path.join(HERE, "requirements.txt")
NAB_DEFAULT = os.path.expanduser("~/.cache/outlierd/nab")
SKAB_DEFAULT = os.path.expanduser("~/.cache/outlierd/skab")
NAB_HELP = """NAB not found at {path}: the NAB part needs a checkout of github.com/numenta/NAB (MIT;
its data/, labels/, config/profiles.json and nab/sweeper.py; results/ only for the self-check):
    git clone --depth 1 https://github.com/numenta/NAB ~/.cache/outlierd/nab
or point OUTLIERD_NAB (or --nab) at one. It is kept outside the repository on purpose."""

P_GEN = 2000  # probation of the generated streams (their --head: no anomaly before it)
W_FIT, B_FIT = 2000, 500  # sliding window of the refitted peers: fit on W rows every B rows
N_MAD = 500  # rows of the rolling median/MAD
Z_MAD = 3.5  # the modified z rule's threshold
HST_Q = 0.995  # HST flags: running quantile of its past scores


# Generated streams: name, `outlierd gen --kind sensors` arguments, what it is (the issue's
# scenarios first). --head P_GEN keeps every anomaly after the probation.
STREAMS = [
    ("spikes", "--rows 20000 --spike-rate 0.001 --spike-min 20 --spike-max 30", "3 correlated sensors, 0.1% spikes +40..+60 on temp (70 +- 2)"),
    ("clean", "--rows 20000 --spike-rate 0", "the same sensors, no anomaly"),
    ("drift", "--rows 20000 --sensors 4 --spike-rate 0 --drift 1 --drift-every 5000", "4 sensors drifting 1 sd per 5,000 rows, no anomaly"),
    ("newuser", "--rows 20000 --spike-rate 0.00465 --spike-min 25 --spike-max 30 --seed 2", "93 spikes of temp 120..130 vs 70 +- 2"),
    ("shift", "--rows 20000 --spike-rate 0 --shifts 4 --shift-size 6 --shift-length 300 --anomaly-sensor -1 --seed 3", "4 level shifts of +6 sd, 300 rows each, any sensor"),
    ("stuck", "--rows 20000 --spike-rate 0 --stuck 2 --stuck-at 8 --stuck-length 2500 --seed 4", "2 stuck spans of temp at +8 sd, 2,500 rows each"),
    ("seasonal", "--rows 20000 --spike-rate 0 --daily 5 --contextual 20 --seed 5", "daily cycle of +-5 sd, 20 contextual anomalies (a noon value at midnight)"),
    ("fleet", "--rows 100000 --keys 200 --sensors 1 --spike-rate 0.002 --spike-min 8 --spike-max 8 --seed 6", "200 sensors, baselines 0..1000, noise sd 1..5, 0.2% spikes of +8 own sd"),
]
QUICK_STREAMS = {"spikes", "clean", "drift", "newuser"}  # the four; the fleet alone takes ~2 min
QUICK_NAB = "realKnownCause"  # --quick: this NAB category only (7 files)


def ensure_venv(script=__file__):
    """Re-exec script inside the bench venv, creating it and installing requirements.txt when needed."""
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(py):
        print(f"stream_sbs: creating {VENV} ...", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    probe = subprocess.run([py, "-c", "import pyod, river, sklearn, numpy, pandas"], capture_output=True)
    if probe.returncode != 0:
        subprocess.check_call([py, "-m", "pip", "install", "-q", "-r", REQUIREMENTS])
    os.execv(py, [py, os.path.abspath(script)] + sys.argv[1:])


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"streams {','.join(sorted(QUICK_STREAMS))} and NAB's {QUICK_NAB} only")
    ap.add_argument("--sets", default="gen,nab", help="gen, nab, skab (comma-separated; default gen,nab)")
    ap.add_argument("--streams", default="", help="generated streams to run (default: all; see STREAMS)")
    ap.add_argument("--nab", default=os.environ.get("OUTLIERD_NAB", NAB_DEFAULT), help="NAB checkout (default $OUTLIERD_NAB or ~/.cache/outlierd/nab)")
    ap.add_argument("--skab", default=os.environ.get("OUTLIERD_SKAB", SKAB_DEFAULT), help="SKAB checkout (default $OUTLIERD_SKAB or ~/.cache/outlierd/skab); --sets skab")
    ap.add_argument("--skab-files", default="all", choices=["all", "even", "odd"],
                    help="SKAB's experiments by the number of their file (valve1/0.csv: 0): all, or the half that chose configs/skab.yaml (even) or the half it is reported on (odd)")
    ap.add_argument("--nab-files", default="all", choices=["all", "in", "out"],
                    help="NAB's files by the CRC-32 of their path under data/ (e.g. realKnownCause/nyc_taxi.csv): all, or the half that chose detect.recent_horizon and recent_scores (in: even CRC) or the half they are reported on (out: odd)")
    ap.add_argument("--config", default="", help="pipeline config for outlierd replay (default: none, pipeline.Default())")
    ap.add_argument("--also-config", action="append", default=[], metavar="SET:NAME=FILE",
                    help="outlierd again on SET (nab or skab) with config FILE, as detector \"outlierd NAME\" (repeatable): configs side by side in one run")
    ap.add_argument("--replay-args", default="", help="extra arguments for outlierd replay, e.g. \"--window 5000 --refresh-records 2500\"")
    ap.add_argument("--with-ts", action="store_true", help="give outlierd a ts column (epoch ms) too, for a --config whose ingest names it the timestamp (derived time features); the peers never see it")
    ap.add_argument("--binary", default="", help="outlierd binary to replay (default: go build ./cmd/outlierd into bin/)")
    ap.add_argument("--only-ours", action="store_true", help="run outlierd only (quick sweeps of its config)")
    ap.add_argument("--raw", default="", help="write every figure as one JSON object per line here")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--nab-self-check", action="store_true", help="score NAB's published numenta results with this scorer (expects 70.1 standard)")
    return ap.parse_args()


# ----------------------------------------------------------------------------- detectors


def run_outlierd(binary, csv_path, probation, args, key_column=None):
    """outlierd replay over csv_path; returns (score, flags, json result, recent score or None)."""
    import numpy as np
    import pandas as pd

    with tempfile.TemporaryDirectory() as td:
        vpath = os.path.join(td, "v.csv")
        cmd = [binary, "replay", "--input", csv_path, "--label-column", "label", "--min-records", str(probation),
               "--verdicts-out", vpath, "--json"]
        if key_column:
            cmd += ["--key-column", key_column]
        if args.config:
            cmd += ["--config", args.config]
        cmd += shlex.split(args.replay_args)
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"stream_sbs: {' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
        res = json.loads(out.stdout)
        v = pd.read_csv(vpath, keep_default_na=False)
        score = pd.to_numeric(v["score"], errors="coerce").to_numpy(dtype=np.float64)
        flags = v["outlier"].astype(str).str.lower().eq("true").to_numpy()
        recent = None  # detect.recent_scores (batch.Score.Recent); absent from older binaries, empty when off
        if "recent" in v.columns:
            recent = pd.to_numeric(v["recent"], errors="coerce").to_numpy(dtype=np.float64)
            if np.isnan(recent).all():
                recent = None
        return score, flags, res, recent


def run_outlierd_rows(binary, df, probation, args, td):
    """run_outlierd on the rows of df (a frame with a label column), written to a file in td."""
    path = os.path.join(td, "rows.csv")
    df.to_csv(path, index=False)
    score, flags, _, _ = run_outlierd(binary, path, probation, args)
    return score, flags


def hst(X):
    """River HalfSpaceTrees (defaults) after an online MinMaxScaler; flags: the running HST_Q quantile."""
    import numpy as np
    from river import anomaly, compose, preprocessing, stats

    model = compose.Pipeline(preprocessing.MinMaxScaler(), anomaly.HalfSpaceTrees(seed=42))
    q = stats.Quantile(HST_Q)
    names = [f"x{j}" for j in range(X.shape[1])]
    score, flags = np.empty(len(X)), np.zeros(len(X), dtype=bool)
    for i, row in enumerate(X):
        x = dict(zip(names, row.tolist()))
        s = model.score_one(x)
        t = q.get()
        score[i], flags[i] = s, (t is not None and i >= 100 and s > t)  # 100: a quantile needs some history
        q.update(s)
        model.learn_one(x)
    return score, flags


def refitted(make):
    """A PyOD model refitted on a sliding window: fit at row P on rows [0, P), then every B_FIT
    rows on the previous min(W_FIT, i) rows, scoring the next rows; rows before P are NaN."""
    import numpy as np

    def run(X, probation):
        score, flags = np.full(len(X), np.nan), np.zeros(len(X), dtype=bool)
        i = probation
        while i < len(X):
            lo = max(0, i - W_FIT)
            m = make()
            m.fit(X[lo:i])
            hi = min(len(X), i + B_FIT)
            s = m.decision_function(X[i:hi])
            score[i:hi], flags[i:hi] = s, s > m.threshold_
            i = hi
        return score, flags

    return run


def iforest(X, probation):
    from pyod.models.iforest import IForest

    return refitted(lambda: IForest(n_estimators=100, random_state=0))(X, probation)


def ecod(X, probation):
    from pyod.models.ecod import ECOD

    return refitted(lambda: ECOD())(X, probation)


class MendedPCA:
    """PyOD's PCA(random_state=0) as a user fits it on a window whose columns may not all vary:
    on the window's columns that vary (a constant column standardises to zeros and gives a zero
    eigenvalue, which PyOD divides by: every score infinite), with as many components as the
    rank of the window's standardised covariance (columns that repeat one another give zero
    eigenvalues too; numpy's matrix_rank tolerance, the largest eigenvalue x columns x machine
    epsilon), and scoring with the same columns. A full-rank window without a constant column
    is fitted exactly as PyOD's defaults fit it (every component). A window in which no column
    varies has nothing to measure: its rows score 0 and none is flagged."""

    def fit(self, X):
        import numpy as np
        from pyod.models.pca import PCA
        from sklearn.preprocessing import StandardScaler

        self.keep_ = np.ptp(X, axis=0) > 0
        self.model_, self.threshold_ = None, 0.0
        if not self.keep_.any():
            return self
        Z = self._columns(X)
        rank = np.linalg.matrix_rank(np.atleast_2d(np.cov(StandardScaler().fit_transform(Z), rowvar=False)), hermitian=True)
        self.model_ = PCA(n_components=rank if rank < Z.shape[1] else None, random_state=0).fit(Z)
        self.threshold_ = self.model_.threshold_
        return self

    def decision_function(self, X):
        import numpy as np

        if self.model_ is None:
            return np.zeros(len(X))
        return self.model_.decision_function(self._columns(X))

    def _columns(self, X):
        # X itself where every column varies: a copy's other alignment moves BLAS's last bits, and
        # such a window must score exactly as PyOD's defaults did before the mend
        return X if self.keep_.all() else X[:, self.keep_]


def pca(X, probation):
    """PyOD's PCA with its defaults (every component, standardised, each weighted by its
    eigenvalue: a Mahalanobis-like distance), refitted as IForest and ECOD are: the
    process-monitoring baseline (PCA T^2/Q) a plant engineer would pick; fitted on each window's
    varying columns with its zero eigenvalues kept out (MendedPCA; docs/BENCHMARKS.md §12.32)."""
    return refitted(MendedPCA)(X, probation)


def madz(X, probation):
    """max_j 0.6745 |x_j - med_j| / MAD_j over the previous N_MAD rows (from row min(probation, N_MAD) on)."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    n, d = X.shape
    z = np.full(n, np.nan)
    start = max(1, min(probation, N_MAD))
    if n <= start:
        return z, np.zeros(n, dtype=bool)
    zmax = np.zeros(n - start)
    for j in range(d):
        x = X[:, j]
        pad = np.concatenate([np.full(N_MAD, np.nan), x])  # row i's window: pad[i : i + N_MAD] = x[i-N_MAD : i]
        zj = np.empty(n - start)
        for c0 in range(start, n, 4096):  # chunks bound the window views' memory
            c1 = min(n, c0 + 4096)
            win = sliding_window_view(pad, N_MAD)[c0:c1]
            med = np.nanmedian(win, axis=1)
            dev = np.abs(win - med[:, None])
            mad = np.nanmedian(dev, axis=1) / 0.6745
            mean_ad = np.nanmean(dev, axis=1) / 0.7979
            scale = np.where(mad > 0, mad, mean_ad)
            diff = np.abs(x[c0:c1] - med)
            with np.errstate(divide="ignore", invalid="ignore"):
                zc = np.where(scale > 0, diff / scale, np.where(diff > 0, 1e12, 0.0))
            zj[c0 - start:c1 - start] = zc
        zmax = np.maximum(zmax, zj)
    z[start:] = zmax
    return z, z > Z_MAD


def windowed_gaussian(x):
    """NAB's own windowedGaussian baseline (nab/detectors/gaussian/windowedGaussian_detector.py,
    ported, vectorised): 1 - the two-sided Gaussian tail probability of x under the mean and
    (population) sd of a window that fills to 6400 values, then slides by 100. A check of this
    driver of NAB's scorer on a detector run here: NAB publishes 39.6 (standard) for it."""
    import numpy as np
    from scipy.special import erfc

    size, step = 6400, 100
    n = len(x)
    c1 = np.concatenate([[0.0], np.cumsum(x)])
    c2 = np.concatenate([[0.0], np.cumsum(x * x)])
    i = np.arange(n)
    end = np.where(i <= size, i, size + step * ((i - size) // step))  # the window is x[end-len : end]
    start = np.maximum(end - size, 0)
    cnt = np.maximum(end - start, 1)
    mean = (c1[end] - c1[start]) / cnt
    sd = np.sqrt(np.maximum((c2[end] - c2[start]) / cnt - mean * mean, 0.0))
    sd = np.where(sd == 0.0, 0.000001, sd)
    score = 1 - 0.5 * erfc(np.abs(x - mean) / sd / np.sqrt(2))
    score[0] = 0.0
    return score


def per_key(fn, X, keys, probation, pass_index=False):
    """fn run on each key's rows alone (in order), results scattered back; probation is then
    counted in the key's own rows, scaled by the key's share of the stream."""
    import numpy as np

    score, flags = np.full(len(X), np.nan), np.zeros(len(X), dtype=bool)
    uniq, inv = np.unique(keys, return_inverse=True)
    for k in range(len(uniq)):
        idx = np.flatnonzero(inv == k)
        p = max(2, round(probation * len(idx) / len(X)))
        s, f = fn(X[idx], p, idx) if pass_index else fn(X[idx], p)
        score[idx], flags[idx] = s, f
    return score, flags


# ----------------------------------------------------------------------------- metrics


def clean(score):
    """score as float64 with NaN (not scored) lowest and infinities kept ordered but finite."""
    import numpy as np

    s = np.nan_to_num(np.asarray(score, dtype=np.float64), nan=-np.inf)
    return np.where(np.isneginf(s), np.finfo(np.float64).min, np.where(np.isposinf(s), np.finfo(np.float64).max, s))


def evaluate(score, flags, y, n_equal=None):
    """AUC/AP of score, P/R/F1 of flags, F1 of the top n_equal, share flagged; NaN score = lowest."""
    import numpy as np
    from sklearn.metrics import average_precision_score, roc_auc_score

    s = clean(score)
    out = {"flagged": int(flags.sum()), "share": float(flags.mean())}
    pos = int(y.sum())
    if 0 < pos < len(y):
        out["roc_auc"] = float(roc_auc_score(y, s))
        out["ap"] = float(average_precision_score(y, s))
        tp = int((flags & (y == 1)).sum())
        p = tp / max(int(flags.sum()), 1)
        r = tp / pos
        out.update(precision=p, recall=r, f1=0.0 if tp == 0 else 2 * p * r / (p + r))
        if n_equal is not None:
            if n_equal <= 0:
                out["f1_equal"] = 0.0
            else:
                top = np.argsort(-s, kind="stable")[:n_equal]
                tp = int(y[top].sum())
                p, r = tp / n_equal, tp / pos
                out["f1_equal"] = 0.0 if tp == 0 else 2 * p * r / (p + r)
    return out


PEERS = ("HST", "IForest", "ECOD", "MAD-z", "PCA")
# A peer's harness revision where it is not 1: caches written before a peer was mended must not
# answer for it (unseen.py and halves.py keep a revised peer's scores apart). PCA 2: MendedPCA.
PEER_REVISION = {"PCA": 2}


def peers(X, probation, keys=None, names=PEERS):
    """Every peer's (score, flags) on X (or those named); with keys, per key as well as global."""
    runs = [("HST", lambda X, p: hst(X)), ("IForest", iforest), ("ECOD", ecod), ("MAD-z", madz), ("PCA", pca)]
    out = {}
    for name, fn in runs:
        if name not in names:
            continue
        t0 = time.time()
        s, f = fn(X, probation)
        out[name + (" global" if keys is not None else "")] = (s, f, time.time() - t0)
        if keys is not None:
            t0 = time.time()
            s, f = per_key(fn, X, keys, probation)
            out[name + " per key"] = (s, f, time.time() - t0)
    return out


# ----------------------------------------------------------------------------- generated streams


def replay_has(binary, flag):
    out = subprocess.run([binary, "replay", "--help"], capture_output=True, text=True)
    return ("-" + flag) in (out.stdout + out.stderr)


def run_generated(binary, args, td, raw):
    import numpy as np
    import pandas as pd

    only = set(filter(None, args.streams.split(",")))
    keyed = replay_has(binary, "key-column")
    results = []
    for name, gargs, what in STREAMS:
        if (only and name not in only) or (args.quick and not only and name not in QUICK_STREAMS):
            continue
        t0 = time.time()
        path = os.path.join(td, f"{name}.csv")
        with open(path, "w") as fh:
            subprocess.check_call([binary, "gen", "--kind", "sensors", "--head", str(P_GEN)] + (["--ts"] if args.with_ts else []) + gargs.split(), stdout=fh)
        df = pd.read_csv(path)
        y = df["label"].to_numpy(dtype=int)
        keys = df["key"].to_numpy() if "key" in df.columns else None
        feats = [c for c in df.columns if c not in ("label", "key", "ts")]
        X = df[feats].to_numpy(dtype=np.float64)
        ours_path = path
        if keys is not None and not keyed:  # today's replay reads every column as a feature
            ours_path = os.path.join(td, f"{name}-nokey.csv")
            df.drop(columns=["key"]).to_csv(ours_path, index=False)
        t1 = time.time()
        score, flags, res, recent = run_outlierd(binary, ours_path, P_GEN, args, "key" if (keys is not None and keyed) else None)
        ours_s = time.time() - t1
        ev = slice(P_GEN, None)
        yv = y[ev]
        row = {"stream": name, "what": what, "rows": len(y), "anomalies": int(yv.sum()), "probation": P_GEN,
               "keyed": bool(keys is not None and keyed), "scores": {}}
        m = evaluate(score[ev], flags[ev], yv)
        m["seconds"] = ours_s
        row["scores"]["outlierd" + (" global" if keys is not None and not keyed else "")] = m
        n_equal = m["flagged"]
        if recent is not None:  # the same verdicts; the ranking of the recent score
            rm = evaluate(recent[ev], flags[ev], yv)
            rm["seconds"] = ours_s
            row["scores"]["outlierd recent"] = rm
        if keys is not None and not keyed:
            # Until replay has --key-column: a replay of each key's rows alone (what per-key
            # models would see), P scaled to the key's share of the stream like the peers'.
            t1 = time.time()
            # min_records >= 20: the figures of §12 were made so (replay since lowers
            # proclus.k with min_records; kept for comparability).
            s, f = per_key(lambda Xk, p, idx: run_outlierd_rows(binary, df.drop(columns=["key"]).iloc[idx], max(p, 20), args, td), X, keys, P_GEN, pass_index=True)
            pm = evaluate(s[ev], f[ev], yv)
            pm["seconds"] = time.time() - t1
            row["scores"]["outlierd per key (a replay per key)"] = pm
        if not args.only_ours:
            for peer, (s, f, secs) in peers(X, P_GEN, keys).items():
                pm = evaluate(s[ev], f[ev], yv, n_equal)
                pm["seconds"] = secs
                row["scores"][peer] = pm
        results.append(row)
        if raw:
            raw.write(json.dumps({"part": "generated", **row}) + "\n")
            raw.flush()
        print(f"# {name}: {len(y)} rows, {int(yv.sum())} anomalies, outlierd flagged {n_equal}, {time.time() - t0:.0f} s", file=sys.stderr)
    return results


# ----------------------------------------------------------------------------- NAB


def load_sweeper(nab):
    """NAB's own nab/sweeper.py, imported from the checkout (it needs only the standard library)."""
    path = os.path.join(nab, "nab", "sweeper.py")
    spec = importlib.util.spec_from_file_location("nab_sweeper", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def nab_half(rel):
    """The half of NAB a file is in: "in" (its path's CRC-32 even: the files that chose
    detect.recent_horizon and recent_scores, docs/BENCHMARKS.md §12.12) or "out" (odd: held out)."""
    return "in" if zlib.crc32(rel.encode()) % 2 == 0 else "out"


def nab_corpus(nab, quick, which="all"):
    import pandas as pd

    with open(os.path.join(nab, "labels", "combined_windows.json")) as fh:
        windows = json.load(fh)
    files = []
    for rel in sorted(windows):
        if quick and not rel.startswith(QUICK_NAB + "/") or which != "all" and nab_half(rel) != which:
            continue
        df = pd.read_csv(os.path.join(nab, "data", rel), header=0, parse_dates=[0])
        win = [(pd.Timestamp(a), pd.Timestamp(b)) for a, b in windows[rel]]
        files.append((rel, df, win))
    return files


def nab_score(sweeper_mod, costs, files, scores, threshold=None):
    """NAB's protocol for one detector and profile: nab/optimizer.py (sweep over the corpus,
    best threshold) unless threshold is given, then nab/scorer.py (each file at that
    threshold, summed). Returns (threshold, raw)."""
    sw = sweeper_mod.Sweeper(probationPercent=0.15, costMatrix=costs)
    if threshold is None:
        rows = []
        for (rel, df, win), s in zip(files, scores):
            rows.extend(sw.calcSweepScore(list(df["timestamp"]), list(s), win, rel))
        threshold = sorted(sw.calcScoreByThreshold(rows), key=lambda x: x.score, reverse=True)[0].threshold
    raw, flagged = 0.0, 0
    for (rel, df, win), s in zip(files, scores):
        _, match = sw.scoreDataSet(list(df["timestamp"]), list(s), win, rel, threshold)
        raw += match.score
        flagged += match.tp + match.fp
    return threshold, raw, flagged


NULL_RAW = {}


def nab_normalise(sweeper_mod, profiles, files, scores):
    """runner.normalize(): 100 * (raw - null) / (perfect - null) per profile; null = constant 0.5."""
    out = {}
    n_windows = sum(len(w) for _, _, w in files)
    for prof, spec in profiles.items():
        costs = spec["CostMatrix"]
        key = (prof, id(files))
        if key not in NULL_RAW:  # the null detector: NAB's results/null, a constant 0.5
            NULL_RAW[key] = nab_score(sweeper_mod, costs, files, [[0.5] * len(df) for _, df, _ in files])[1]
        null_raw = NULL_RAW[key]
        thr, raw, flagged = nab_score(sweeper_mod, costs, files, scores)
        perfect = n_windows * costs["tpWeight"]
        out[prof] = {"score": 100 * (raw - null_raw) / (perfect - null_raw), "threshold": thr, "flagged": flagged,
                     "raw": raw, "null_raw": null_raw}
    return out


def to_unit(scores):
    """A detector's per-file scores as NAB's sweeper wants them, in [0, 1]: the dense rank of
    each score over the whole corpus / the number of distinct scores. NAB's sweep and its
    corpus-wide threshold depend only on that order (ties included), which this keeps
    exactly (a squashing function such as atan would merge scores near its ends)."""
    import numpy as np
    from scipy.stats import rankdata

    flat = np.concatenate(scores)
    rank = rankdata(flat, method="dense")
    unit = rank / rank.max()
    out, at = [], 0
    for s in scores:
        out.append(list(unit[at:at + len(s)]))
        at += len(s)
    return out


def nab_probation(n):
    return int(min(math.floor(0.15 * n), 0.15 * 5000))  # sweeper.py _getProbationaryLength


SKAB_HELP = """SKAB not found at {path}: the SKAB part needs the data/ of github.com/waico/SKAB (GPL-3.0,
kept outside the repository), e.g.
    git clone --depth 1 https://github.com/waico/SKAB ~/.cache/outlierd/skab
or point OUTLIERD_SKAB (or --skab) at one. It is scored by NAB's sweeper: it needs NAB too."""


def skab_corpus(skab, quick, which="all"):
    """SKAB's labelled experiments (data/valve1, valve2, other: 34 files, 8 sensors, one
    anomalous span or more each), as NAB-style (name, frame, windows): each maximal run of
    anomaly = 1 rows is a window."""
    import numpy as np
    import pandas as pd

    files = []
    for d in ("valve1", "valve2", "other"):
        names = sorted((f for f in os.listdir(os.path.join(skab, "data", d)) if f.endswith(".csv")), key=lambda f: int(f.split(".")[0]))
        for f in names[:2] if quick else names:
            if which != "all" and int(f.split(".")[0]) % 2 != (0 if which == "even" else 1):
                continue
            df = pd.read_csv(os.path.join(skab, "data", d, f), sep=";", parse_dates=["datetime"]).rename(columns={"datetime": "timestamp"})
            y = df["anomaly"].to_numpy(dtype=int)
            edges = np.flatnonzero(np.diff(np.concatenate([[0], y, [0]])))  # starts and ends (exclusive) of the runs of 1
            win = [(df["timestamp"][a], df["timestamp"][b - 1]) for a, b in zip(edges[::2], edges[1::2])]
            files.append((f"{d}/{f}", df.drop(columns=["anomaly", "changepoint"]), win))
    return files


def run_nab(binary, args, td, raw, corpus="nab"):
    import numpy as np

    home = args.nab if corpus == "nab" else args.skab
    if not os.path.isdir(os.path.join(home, "data")) or not os.path.isdir(os.path.join(args.nab, "nab")):
        print(NAB_HELP.format(path=args.nab) if corpus == "nab" or not os.path.isdir(os.path.join(args.nab, "nab"))
              else SKAB_HELP.format(path=args.skab), file=sys.stderr)
        if corpus in set(args.sets.split(",")) and args.sets != "gen,nab":
            raise SystemExit(2)
        return None
    sweeper_mod = load_sweeper(args.nab)  # SKAB too is scored by NAB's sweeper
    with open(os.path.join(args.nab, "config", "profiles.json")) as fh:
        profiles = json.load(fh)
    files = nab_corpus(args.nab, args.quick, args.nab_files) if corpus == "nab" else skab_corpus(args.skab, args.quick, args.skab_files)
    if args.nab_self_check and corpus == "nab":
        if args.nab_files == "all":
            check_numenta(sweeper_mod, profiles, files, args.nab)
        else:
            print("# NAB self-check skipped: NAB publishes figures for the whole corpus only (--nab-files all)", file=sys.stderr)
    feats = [c for c in files[0][1].columns if c != "timestamp"]
    skab_own = {}  # SKAB's outlier-detection metric: detector -> [tp, fp, fn, tn] of its own flags after the probation
    dets = {}  # detector -> list of per-file scores in [0, 1]
    pointwise = {}  # detector -> list of per-file AP
    secs = {}
    quiet = {}  # detector -> [rows flagged, rows] after the probation of the series without a window
    t0 = time.time()
    for rel, df, win in files:
        n = len(df)
        p = nab_probation(n)
        y = np.zeros(n, dtype=int)
        for a, b in win:
            y[((df["timestamp"] >= a) & (df["timestamp"] <= b)).to_numpy()] = 1
        path = os.path.join(td, "nab.csv")
        df[feats].assign(label=y).to_csv(path, index=False)
        t1 = time.time()
        score, flags, _, recent = run_outlierd(binary, path, max(p, 2), args)
        per = {"outlierd": (score, flags, time.time() - t1)}
        if recent is not None:
            per["outlierd recent"] = (recent, flags, 0.0)
        for name, cfg in also_configs(args, corpus):
            t1 = time.time()
            s2, f2, _, r2 = run_outlierd(binary, path, max(p, 2), argparse.Namespace(**{**vars(args), "config": cfg}))
            per["outlierd " + name] = (s2, f2, time.time() - t1)
            if r2 is not None:
                per["outlierd " + name + " recent"] = (r2, f2, 0.0)
        if not args.only_ours:
            per.update(peers(df[feats].to_numpy(dtype=np.float64), max(p, 2)))
        if corpus == "skab":  # EVALUATION.md: F1 with common anomalies needs a flag-everything reference
            per["flag everything"] = (np.zeros(n), np.ones(n, dtype=bool), 0.0)
        if not args.only_ours and corpus == "nab":
            t1 = time.time()
            wg = windowed_gaussian(df["value"].to_numpy(dtype=np.float64))
            per["NAB windowedGaussian"] = (wg, np.zeros(n, dtype=bool), time.time() - t1)
        for det, (s, f, sec) in per.items():
            s = np.nan_to_num(np.asarray(s, dtype=np.float64), nan=-np.inf)
            dets.setdefault(det, []).append(s)
            secs[det] = secs.get(det, 0.0) + sec
            if det == "outlierd" or det[len("outlierd "):] in dict(also_configs(args, corpus)):
                dets.setdefault(det + " flags", []).append(f.astype(np.float64))
            yv = y[p:]
            if not det.endswith(" recent") and det != "NAB windowedGaussian":  # those have no flags of their own
                fv = np.asarray(f[p:], dtype=bool)
                c = skab_own.setdefault(det, [0, 0, 0, 0])
                for k, v in enumerate(((fv & (yv == 1)).sum(), (fv & (yv == 0)).sum(), (~fv & (yv == 1)).sum(), (~fv & (yv == 0)).sum())):
                    c[k] += int(v)
            if not win:
                q = quiet.setdefault(det, [0, 0])
                q[0] += int(np.asarray(f[p:]).sum())
                q[1] += n - p
            if 0 < yv.sum() < len(yv):
                pointwise.setdefault(det, []).append(evaluate(s[p:], f[p:], yv)["ap"])
        print(f"# {corpus} {rel}: {n} rows, {len(win)} windows, {time.time() - t0:.0f} s so far", file=sys.stderr)
    results = {"corpus": corpus, "files": len(files), "windows": sum(len(w) for _, _, w in files), "rows": sum(len(df) for _, df, _ in files),
               "detectors": {}}
    for det, scores in dets.items():
        r = nab_normalise(sweeper_mod, profiles, files, to_unit(scores))
        r["pointwise_ap"] = float(np.mean(pointwise[det])) if det in pointwise else None
        r["quiet_share"] = quiet[det][0] / quiet[det][1] if det in quiet and det != "NAB windowedGaussian" and not det.endswith(" recent") else None
        r["seconds"] = secs.get(det)
        if det in skab_own:  # SKAB's outlier-detection figures of the detector's own flags, pooled over the files
            tp, fp, fn, tn = skab_own[det]
            r["own_f1"] = 2 * tp / max(2 * tp + fp + fn, 1)
            r["own_far"], r["own_mar"] = fp / max(fp + tn, 1), fn / max(fn + tp, 1)
        results["detectors"][det] = r
        if raw:
            raw.write(json.dumps({"part": corpus, "detector": det, **r}) + "\n")
            raw.flush()
    return results


def also_configs(args, corpus):
    """(name, file) of each --also-config SET:NAME=FILE whose SET is corpus."""
    out = []
    for spec in args.also_config:
        where, _, rest = spec.partition(":")
        name, _, cfg = rest.partition("=")
        if where not in ("nab", "skab") or not name or not cfg:
            raise SystemExit(f"stream_sbs: --also-config {spec!r}: want SET:NAME=FILE, SET nab or skab")
        if where == corpus:
            out.append((name, cfg))
    return out


def check_numenta(sweeper_mod, profiles, files, nab):
    """Self-check of this driver of NAB's scorer: NAB's published results of its numenta
    detector (results/numenta) must score as results/final_results.json says."""
    import pandas as pd

    scores = []
    for rel, df, _ in files:
        d, f = os.path.split(rel)
        scores.append(list(pd.read_csv(os.path.join(nab, "results", "numenta", d, "numenta_" + f))["anomaly_score"]))
    got = nab_normalise(sweeper_mod, profiles, files, scores)
    with open(os.path.join(nab, "results", "final_results.json")) as fh:
        want = json.load(fh)["numenta"]
    with open(os.path.join(nab, "config", "thresholds.json")) as fh:
        thresholds = json.load(fh)["numenta"]
    for prof, spec in profiles.items():
        # NAB's published figures were scored at its config/thresholds.json, found by an
        # earlier optimizer; today's sweep can find a slightly better threshold.
        _, raw, _ = nab_score(sweeper_mod, spec["CostMatrix"], files, scores, thresholds[prof]["threshold"])
        g = got[prof]
        at = 100 * (raw - g["null_raw"]) / (sum(len(w) for _, _, w in files) * spec["CostMatrix"]["tpWeight"] - g["null_raw"])
        print(f"# NAB self-check, numenta {prof}: {g['score']:.2f} here (optimised threshold {g['threshold']:.4f}), "
              f"{at:.2f} at NAB's thresholds.json ({thresholds[prof]['threshold']:.4f}), {want[prof]:.2f} published", file=sys.stderr)


# ----------------------------------------------------------------------------- report


def fmt(v, digits=3):
    return "—" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else str(v))


def table(head, rows, md):
    if md:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        print("  ".join(h.rjust(w[i]) for i, h in enumerate(head)))
        for r in rows:
            print("  ".join(c.rjust(w[i]) for i, c in enumerate(r)))
    print()


def report_generated(results, md):
    if not results:
        return
    print(("#### " if md else "") + f"Generated streams (probation {P_GEN} rows; figures on the rows after it)\n")
    for r in results:
        print(("**" if md else "") + f"{r['stream']}: {r['what']}; {r['rows']} rows, {r['anomalies']} anomalies after the probation"
              + (", outlierd with --key-column" if r["keyed"] else "") + ("**" if md else "") + "\n")
        anomaly_free = r["anomalies"] == 0
        head = ["detector", "flagged", "share"] if anomaly_free else ["detector", "ROC AUC", "AP", "flagged", "precision", "recall", "F1", "F1 equal flags"]
        head.append("s")
        rows = []
        for det, m in r["scores"].items():
            if anomaly_free:
                cells = [det, str(m["flagged"]), f"{100 * m['share']:.2f}%"]
            else:
                cells = [det, fmt(m.get("roc_auc")), fmt(m.get("ap")), str(m["flagged"]), fmt(m.get("precision")),
                         fmt(m.get("recall")), fmt(m.get("f1")), "—" if det == "outlierd" else fmt(m.get("f1_equal"))]
            cells.append(f"{m['seconds']:.1f}")
            rows.append(cells)
        table(head, rows, md)


def report_nab(res, md):
    if not res:
        return
    skab = res["corpus"] == "skab"
    what = "SKAB (each anomaly span a window)" if skab else "NAB"
    print(("#### " if md else "") + f"{what}: {res['files']} files, {res['rows']} rows, {res['windows']} windows; NAB's scorer (normalised, higher is better) and point-wise AP"
          + ("; SKAB's own F1, FAR and MAR of each detector's flags" if skab else "") + "\n")
    head = ["detector", "standard", "reward low FP", "reward low FN", "rows flagged at NAB's threshold (standard)", "point-wise AP"]
    head += ["own flags F1", "FAR", "MAR"] if skab else ["own flags on the series without anomaly"]
    head.append("s")
    rows = []
    for det, r in sorted(res["detectors"].items(), key=lambda x: -x[1]["standard"]["score"]):
        row = [det, f"{r['standard']['score']:.1f}", f"{r['reward_low_FP_rate']['score']:.1f}", f"{r['reward_low_FN_rate']['score']:.1f}",
               str(r["standard"]["flagged"]), fmt(r["pointwise_ap"])]
        if skab:
            row += ["—", "—", "—"] if "own_f1" not in r else [f"{r['own_f1']:.2f}", f"{100 * r['own_far']:.1f}%", f"{100 * r['own_mar']:.1f}%"]
        else:
            row.append("—" if r.get("quiet_share") is None else f"{100 * r['quiet_share']:.2f}%")
        row.append("—" if r["seconds"] is None else f"{r['seconds']:.0f}")
        rows.append(row)
    table(head, rows, md)


def main():
    args = parse_args()
    # ECOD's skewness warns on near-constant windows (NAB's flat lines); its scores stay finite.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="pyod")
    sets = set(args.sets.split(","))
    binary = args.binary
    if not binary:
        binary = os.path.join(ROOT, "bin", "outlierd")
        subprocess.check_call(["go", "build", "-o", binary, "./cmd/outlierd"], cwd=ROOT)
    raw = open(args.raw, "w") if args.raw else None
    started = time.time()
    gen_res, nab_res, skab_res = [], None, None
    with tempfile.TemporaryDirectory() as td:
        if "gen" in sets:
            gen_res = run_generated(binary, args, td, raw)
        if "nab" in sets:
            nab_res = run_nab(binary, args, td, raw)
        if "skab" in sets:
            skab_res = run_nab(binary, args, td, raw, "skab")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"stream_sbs {' '.join(sys.argv[1:])}: commit {commit}{' (modified)' if dirty else ''}, "
          f"{time.strftime('%Y-%m-%d %H:%MZ', time.gmtime(started))}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"{time.time() - started:.0f} s\n")
    report_generated(gen_res, args.markdown)
    report_nab(nab_res, args.markdown)
    report_nab(skab_res, args.markdown)
    print(f"{time.time() - started:.0f} s in all", file=sys.stderr)


if __name__ == "__main__":
    ensure_venv()
    main()
