#!/usr/bin/env python3
"""SKAB by its own leaderboard's protocol and scorer: each detector's own flags, default config.

    python3 docs/bench/skab_own.py --markdown                  # every file, and the halves
    python3 docs/bench/skab_own.py --also-config b1=docs/bench/batch1.yaml --markdown

docs/bench/halves.py scores SKAB with NAB's protocol on SKAB's labels (a window per anomalous
span, a threshold per detector chosen over the corpus on its score). SKAB's own leaderboard
(github.com/waico/SKAB README, "Proposed Leaderboard"; its notebooks/*.ipynb and core/) is
another protocol, reproduced here with SKAB's own scoring code:

  split   each experiment's first 400 rows train, the rest test (core/utils.py
          preprocess_skab: train_test_split(train_size=400, shuffle=False)); here the 400 rows
          are every detector's probation (learned from, not scored: `outlierd replay
          --min-records 400`; the refitted peers' first fit), and only the test rows are scored.
  outlier problem   the detector's own binary flags on the test rows against the `anomaly`
          column: core/metrics.py chp_score(metric="binary"): F1, FAR %, MAR %, pooled over the
          files as SKAB pools them.
  changepoint problem   the predicted changepoints are the flags' changes (every notebook but
          isolation_forest's, which smooths its own flags first: prediction_cp =
          |prediction.diff()|, its first row the first flag), scored against the `changepoint`
          column by chp_score(metric="nab", window_width="60s",
          anomaly_window_destination="righter"): NAB's three profiles with SKAB's scoring
          function, windows of 60 s to the right of each true changepoint.
No threshold is chosen for anyone: each detector is judged on its own verdicts, as the
leaderboard's entries are. SKAB's core/metrics.py is imported from the SKAB checkout
(--skab, as stream_sbs.py's). Halves: the file number's parity, as stream_sbs.py and halves.py
(even chose configs/skab.yaml and the `recent` rules under NAB's protocol, docs/BENCHMARKS.md
§12.1; the default flags, which this protocol reads, were chosen on generated streams, §9).
The published leaderboard's figures come from other runs (the entries' own notebooks, some
tuned on SKAB), so they are quoted in docs/BENCHMARKS.md §12.25, not compared in this run.
"""
import argparse
import importlib.util
import os
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stream_sbs as sbs  # noqa: E402

TRAIN = 400  # SKAB's preprocess_skab: train_size=400, shuffle=False


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skab", default=os.environ.get("OUTLIERD_SKAB", sbs.SKAB_DEFAULT))
    ap.add_argument("--binary", default="", help="outlierd binary (default: go build ./cmd/outlierd into bin/)")
    ap.add_argument("--config", default="", help="outlierd's config (default: none, pipeline.Default())")
    ap.add_argument("--also-config", action="append", default=[], metavar="NAME=FILE",
                    help="outlierd again with config FILE as \"outlierd NAME\" (repeatable)")
    ap.add_argument("--markdown", action="store_true")
    return ap.parse_args()


def skab_metrics(skab):
    """SKAB's core/metrics.py, imported from the checkout as it is."""
    path = os.path.join(skab, "core", "metrics.py")
    if not os.path.exists(path):
        raise SystemExit(f"skab_own: {path} not found (a SKAB checkout: see docs/bench/README.md)")
    spec = importlib.util.spec_from_file_location("skab_metrics", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def files(skab):
    """(name, half, frame) of each labelled experiment, in stream_sbs.py's order."""
    import pandas as pd

    out = []
    for d in ("valve1", "valve2", "other"):
        names = sorted((f for f in os.listdir(os.path.join(skab, "data", d)) if f.endswith(".csv")), key=lambda f: int(f.split(".")[0]))
        for f in names:
            df = pd.read_csv(os.path.join(skab, "data", d, f), sep=";", index_col="datetime", parse_dates=True)
            out.append((f"{d}/{f}", "even" if int(f.split(".")[0]) % 2 == 0 else "odd", df))
    return out


def flags_of(binary, configs, df):
    """{detector: flags on every row} for one experiment (rows before TRAIN learned from only)."""
    import numpy as np

    feats = [c for c in df.columns if c not in ("anomaly", "changepoint")]
    X = df[feats].to_numpy(dtype=np.float64)
    out = {}
    with tempfile.TemporaryDirectory() as td:
        frame = df[feats].reset_index(drop=True).assign(label=df["anomaly"].to_numpy(dtype=int))
        for name, conf in configs:
            _, f = sbs.run_outlierd_rows(binary, frame, TRAIN, argparse.Namespace(config=conf, replay_args=""), td)
            out[name] = f
    for name, (_, f, _) in sbs.peers(X, TRAIN).items():
        out[name] = np.asarray(f, dtype=bool)
    return out


def score(metrics, runs, dets):
    """{detector: (nab standard, low FP, low FN, missed CPs, FPs, F1, FAR %, MAR %)} over runs [(frame, flags)]."""
    import pandas as pd

    res = {}
    for d in dets:
        t_cp, p_cp, t_out, p_out = [], [], [], []
        for df, fl in runs:
            test = df.iloc[TRAIN:]
            pred = pd.Series(fl[d][TRAIN:].astype(int), index=test.index)
            cp = pred.diff().abs()
            cp.iloc[0] = pred.iloc[0]
            t_cp.append(test["changepoint"].astype(int)), p_cp.append(cp.astype(int))
            t_out.append(test["anomaly"].astype(int)), p_out.append(pred)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nab = metrics.chp_score(t_cp, p_cp, metric="nab", window_width="60s", anomaly_window_destination="righter", verbose=False)
            delay = metrics.chp_score(t_cp, p_cp, metric="average_time", window_width="60s", anomaly_window_destination="righter", verbose=False)
            binary = metrics.chp_score(t_out, p_out, metric="binary", verbose=False)
        res[d] = tuple(float(nab[k]) for k in ("Standard", "LowFP", "LowFN")) + (float(delay[1]), float(delay[2])) + tuple(float(v) for v in binary)
    return res


def main():
    args = parse_args()
    binary = args.binary or os.path.join(sbs.ROOT, "bin", "outlierd")
    if not args.binary:
        import subprocess
        subprocess.check_call(["go", "build", "-o", binary, "./cmd/outlierd"], cwd=sbs.ROOT)
    configs = [("outlierd", args.config)] + [("outlierd " + s.split("=", 1)[0], s.split("=", 1)[1]) for s in args.also_config]
    metrics = skab_metrics(args.skab)
    started = time.time()
    runs = []
    for name, half, df in files(args.skab):
        runs.append((half, df, flags_of(binary, configs, df)))
        print(f"# {name}: {len(df)} rows ({time.time() - started:.0f} s)", file=sys.stderr)
    dets = [c for c, _ in configs] + list(sbs.PEERS)
    import subprocess
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=sbs.ROOT, capture_output=True, text=True).stdout.strip()
    print(f"skab_own {' '.join(sys.argv[1:])}: commit {commit}, {time.strftime('%Y-%m-%d %H:%MZ', time.gmtime(started))}, "
          f"load {os.getloadavg()[0]:.1f}, {time.time() - started:.0f} s")
    for half in ("all", "even", "odd"):
        sel = [(df, fl) for h, df, fl in runs if half == "all" or h == half]
        res = score(metrics, sel, dets)
        print(f"\n#### SKAB {half} ({len(sel)} files): its leaderboard's protocol, each detector's own flags\n")
        head = ["detector", "NAB standard", "NAB low FP", "NAB low FN", "missed CPs", "FPs", "F1", "FAR %", "MAR %"]
        rows = [[d] + [f"{v:.2f}" for v in res[d][:3]] + [f"{v:.0f}" for v in res[d][3:5]] + [f"{v:.2f}" for v in res[d][5:]]
                for d in sorted(dets, key=lambda d: -res[d][0])]
        sbs.table(head, rows, args.markdown)
        peers = [d for d in dets if not d.startswith("outlierd")]
        for k, h in ((0, "NAB standard"), (1, "NAB low FP"), (2, "NAB low FN"), (5, "F1")):
            best = max(peers, key=lambda p: res[p][k])
            print(f"- {h}: best peer {best} {res[best][k]:.2f}; " +
                  ", ".join(f"{o} {res[o][k]:.2f} ({res[o][k] - res[best][k]:+.2f})" for o, _ in configs))


if __name__ == "__main__":
    sbs.ensure_venv(__file__)
    main()
