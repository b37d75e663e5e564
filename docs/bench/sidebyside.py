#!/usr/bin/env python3
"""Side by side: `outlierd replay` against PyOD and River on the same rows of every labelled set.

    python3 docs/bench/sidebyside.py                 # text tables
    python3 docs/bench/sidebyside.py --markdown      # the tables of docs/BENCHMARKS.md
    python3 docs/bench/sidebyside.py --sets cardio,thyroid --only-ours --config my.yaml

It installs its peers itself: a virtual environment under ~/.cache/outlierd/bench-venv with
pyod, river, scikit-learn, numpy and pandas (pip), then re-runs itself there. It builds
bin/outlierd (go build) and runs, per labelled set of --data (every CSV with a `label`
column; 1 = outlier):

  batch   outlierd replay with a window of the whole file (one model scores every row), and
          PyOD IForest (200 trees, seed 0), ECOD, HBOS and KNN (method mean, k = 50: the exact
          k-NN weight w_k(q, D) of the distance detector's paper) fitted on all rows and
          scoring them (KNN on standardised features; the others are invariant to per-feature
          scaling);
  stream  for sets of more than --window rows, in file order and in a fixed shuffle (seed 1):
          outlierd replay --window 5000 --min-records 2000 --refresh-records 2500, and River's
          HalfSpaceTrees (25 trees, height 15, window 250, seed 42, after an online min-max
          scaler: score_one, then learn_one, row by row).

Every detector sees the same rows. Figures: ROC AUC and average precision of each score, and
F1 at an equal number of flags: a peer's top-N rows, N being what outlierd replay flagged (its
alarm rate, detect.alarm_rate). Sets of more than --max-rows rows are subsampled
deterministically (a fixed random subset, kept in file order) so that a full run stays under
about 15 minutes on 2 cores.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
VENV = os.path.expanduser("~/.cache/outlierd/bench-venv")
PEERS = ["pyod", "river", "scikit-learn", "numpy", "pandas"]


def ensure_venv(script=__file__):
    """Re-exec script inside the bench venv, creating it (and installing the peers) when needed."""
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(py):
        print(f"sidebyside: creating {VENV} and installing {' '.join(PEERS)} ...", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    probe = subprocess.run([py, "-c", "import pyod, river, sklearn, numpy, pandas"], capture_output=True)
    if probe.returncode != 0:
        subprocess.check_call([py, "-m", "pip", "install", "-q"] + PEERS)
    os.execv(py, [py, os.path.abspath(script)] + sys.argv[1:])


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"), help="directory of labelled CSV sets")
    ap.add_argument("--sets", default="", help="comma-separated set names (default: every labelled set)")
    ap.add_argument("--max-rows", type=int, default=20000, help="subsample larger sets to this many rows")
    ap.add_argument("--window", type=int, default=5000, help="stream window W")
    ap.add_argument("--min-records", type=int, default=2000)
    ap.add_argument("--refresh-records", type=int, default=2500)
    ap.add_argument("--config", default="", help="pipeline config passed to outlierd replay (its detect section)")
    ap.add_argument("--only-ours", action="store_true", help="run outlierd replay only (quick variant sweeps)")
    ap.add_argument("--modes", default="batch,file,shuffled", help="which runs: batch, file (stream in file order), shuffled")
    ap.add_argument("--raw", default="", help="append one JSON line per (set, run, detector) here")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--binary", default="", help="outlierd binary to replay (default: go build ./cmd/outlierd into bin/)")
    return ap.parse_args()


def labelled_sets(data_dir, only):
    sets = []
    for f in sorted(os.listdir(data_dir)):
        if not f.endswith(".csv"):
            continue
        name = f[:-4]
        if only and name not in only:
            continue
        with open(os.path.join(data_dir, f)) as fh:
            header = fh.readline().strip().split(",")
        if "label" in header:
            sets.append((name, os.path.join(data_dir, f)))
    return sets


def load(path, max_rows):
    import numpy as np
    import pandas as pd

    df = pd.read_csv(path)
    note = ""
    if len(df) > max_rows:
        keep = np.sort(np.random.default_rng(12345).permutation(len(df))[:max_rows])
        note = f"subsampled {max_rows} of {len(df)} rows"
        df = df.iloc[keep].reset_index(drop=True)
    y = (df["label"].to_numpy() != 0).astype(int)
    X = df.drop(columns=["label"]).to_numpy(dtype=np.float64)
    return df, X, y, note


def f1_at(scores, y, n):
    """F1 of flagging the n highest scores (ties broken by row order, stably)."""
    import numpy as np

    if n <= 0:
        return 0.0
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:n]
    tp = int(y[order].sum())
    p, r = tp / n, tp / max(int(y.sum()), 1)
    return 0.0 if tp == 0 else 2 * p * r / (p + r)


def metrics(scores, y, n_flags):
    import numpy as np
    from sklearn.metrics import average_precision_score, roc_auc_score

    s = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=-1e300, posinf=1e300, neginf=-1e300)
    return {"roc_auc": float(roc_auc_score(y, s)), "ap": float(average_precision_score(y, s)), "f1": f1_at(s, y, n_flags)}


def replay(binary, csv_path, args, window, min_records=None, refresh=None):
    import numpy as np
    import pandas as pd

    with tempfile.TemporaryDirectory() as td:
        vpath = os.path.join(td, "v.csv")
        cmd = [binary, "replay", "--input", csv_path, "--label-column", "label", "--window", str(window),
               "--device", "cpu", "--verdicts-out", vpath, "--json"]
        if min_records:
            cmd += ["--min-records", str(min_records)]
        if refresh:
            cmd += ["--refresh-records", str(refresh)]
        if args.config:
            cmd += ["--config", args.config]
        t0 = time.time()
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"sidebyside: {' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
        res = json.loads(out.stdout)
        res["wall_s"] = time.time() - t0
        v = pd.read_csv(vpath, keep_default_na=False)
        score = pd.to_numeric(v["score"], errors="coerce").to_numpy(dtype=np.float64)
        flags = (v["outlier"] == "true").to_numpy() if v["outlier"].dtype == object else v["outlier"].to_numpy(dtype=bool)
        return res, score, flags


def pyod_scores(X):
    from pyod.models.ecod import ECOD
    from pyod.models.hbos import HBOS
    from pyod.models.iforest import IForest
    from pyod.models.knn import KNN
    from sklearn.preprocessing import StandardScaler

    out = {}
    for name, make, Z in [
        ("IForest", lambda: IForest(n_estimators=200, random_state=0), X),
        ("ECOD", lambda: ECOD(), X),
        ("HBOS", lambda: HBOS(), X),
        ("KNN", lambda: KNN(method="mean", n_neighbors=min(50, len(X) - 1)), StandardScaler().fit_transform(X)),
    ]:
        t0 = time.time()
        m = make()
        m.fit(Z)
        out[name] = (m.decision_scores_, time.time() - t0)
    return out


def hst_scores(X):
    from river import anomaly, compose, preprocessing

    model = compose.Pipeline(preprocessing.MinMaxScaler(), anomaly.HalfSpaceTrees(n_trees=25, height=15, window_size=250, seed=42))
    names = [f"x{j}" for j in range(X.shape[1])]
    out = []
    t0 = time.time()
    for row in X:
        x = dict(zip(names, row.tolist()))
        out.append(model.score_one(x))
        model.learn_one(x)
    return out, time.time() - t0


def main():
    args = parse_args()
    import numpy as np

    only = set(filter(None, args.sets.split(",")))
    sets = labelled_sets(args.data, only)
    if not sets:
        raise SystemExit(f"sidebyside: no labelled set in {args.data}")
    binary = args.binary
    if not binary:
        binary = os.path.join(ROOT, "bin", "outlierd")
        subprocess.check_call(["go", "build", "-o", binary, "./cmd/outlierd"], cwd=ROOT)
    modes = set(args.modes.split(","))
    raw = open(args.raw, "a") if args.raw else None
    batch_rows, stream_rows = [], []
    started = time.time()
    with tempfile.TemporaryDirectory() as td:
        for name, path in sets:
            df, X, y, note = load(path, args.max_rows)
            n = len(y)
            if y.min() == y.max():
                print(f"# {name}: one class only in its labels, skipped", file=sys.stderr)
                continue
            runs = []
            if "batch" in modes:
                runs.append(("batch", np.arange(n)))
            if n > args.window:
                if "file" in modes:
                    runs.append(("stream file order", np.arange(n)))
                if "shuffled" in modes:
                    runs.append(("stream shuffled", np.random.default_rng(1).permutation(n)))
            for run, order in runs:
                csv_path = os.path.join(td, f"{name}-{run.replace(' ', '_')}.csv")
                df.iloc[order].to_csv(csv_path, index=False)
                Xo, yo = X[order], y[order]
                if run == "batch":
                    # --min-records n too: a min_records that --config writes is kept by replay
                    # (a first model of that many rows, then a stream), not the batch case
                    res, score, flags = replay(binary, csv_path, args, window=n + 1, min_records=n)
                else:
                    res, score, flags = replay(binary, csv_path, args, args.window, args.min_records, args.refresh_records)
                nflag = int(flags.sum())
                row = {"set": name, "run": run, "rows": n, "outliers": int(yo.sum()), "flags": nflag, "note": note, "scores": {}}
                m = metrics(score, yo, nflag)
                m["f1"] = float(res.get("f1") or 0.0)  # ours: the flags it raised (null: no flag and no outlier)
                m["seconds"] = res["wall_s"]
                row["scores"]["outlierd"] = m
                for det, q in res.get("detectors", {}).items():
                    row["scores"]["outlierd " + det] = {"roc_auc": q["roc_auc"], "ap": q["average_precision"]}
                if not args.only_ours:
                    if run == "batch":
                        for peer, (s, secs) in pyod_scores(Xo).items():
                            row["scores"][peer] = dict(metrics(s, yo, nflag), seconds=secs)
                    else:
                        s, secs = hst_scores(Xo)
                        row["scores"]["HST"] = dict(metrics(s, yo, nflag), seconds=secs)
                (batch_rows if run == "batch" else stream_rows).append(row)
                if raw:
                    raw.write(json.dumps(row) + "\n")
                    raw.flush()
                print(f"# {name} {run}: {n} rows, {nflag} flagged, {time.time() - started:.0f} s so far", file=sys.stderr)
    report(batch_rows, "batch (window = the whole file)", args.markdown)
    report(stream_rows, f"stream (W = {args.window}, min_records {args.min_records}, refresh {args.refresh_records})", args.markdown)
    print(f"\n{time.time() - started:.0f} s in all", file=sys.stderr)


def report(rows, title, md):
    if not rows:
        return
    dets = []
    for r in rows:
        for d in r["scores"]:
            if d not in dets:
                dets.append(d)
    print(f"\n{'### ' if md else ''}{title}\n")
    for metric in ["roc_auc", "ap", "f1"]:
        ds = [d for d in dets if any(metric in r["scores"].get(d, {}) for r in rows)]
        head = ["set", "run", "rows", "outliers", "flags"] + ds
        if md:
            print(f"**{ {'roc_auc': 'ROC AUC', 'ap': 'average precision', 'f1': 'F1 at the same number of flags'}[metric] }**\n")
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
        else:
            print(metric.upper())
            print("  ".join(f"{h:>12}" for h in head))
        sums = {d: [] for d in ds}
        for r in rows:
            cells = [r["set"], r["run"].replace("stream ", ""), str(r["rows"]), str(r["outliers"]), str(r["flags"])]
            for d in ds:
                v = r["scores"].get(d, {}).get(metric)
                cells.append("—" if v is None else f"{v:.3f}")
                if v is not None:
                    sums[d].append(v)
            print(("| " + " | ".join(cells) + " |") if md else "  ".join(f"{c:>12}" for c in cells))
        cells = ["**mean**" if md else "mean", "", "", "", ""] + [f"{sum(v) / len(v):.3f}" if v else "—" for v in sums.values()]
        print(("| " + " | ".join(cells) + " |") if md else "  ".join(f"{c:>12}" for c in cells))
        print()


if __name__ == "__main__":
    ensure_venv()
    main()
