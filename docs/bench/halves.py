#!/usr/bin/env python3
"""The halves of docs/BENCHMARKS.md §12.11-§12.15 by one command: NAB's scorer on SKAB's and NAB's halves.

    python3 docs/bench/halves.py                          # SKAB: even, odd, all 34; NAB skipped
    python3 docs/bench/halves.py --sets skab,nab          # NAB's in / out / all too (peers cached)
    python3 docs/bench/halves.py --also-config b1=docs/bench/batch1.yaml --markdown

stream_sbs.py scores one half per run; the halves here come from one replay of each file: the
same protocol, detectors and scorer (this script imports stream_sbs.py's skab_corpus,
nab_corpus, run_outlierd, peers, windowed_gaussian, to_unit and nab_normalise, and NAB's
nab/sweeper.py from the NAB checkout), then every half is scored as stream_sbs.py scores it
with --skab-files even|odd|all or --nab-files in|out|all (the half is the corpus: its own
dense ranks, its own corpus-wide thresholds). The figures equal stream_sbs.py's to the digit.

The peers' scores do not depend on outlierd, so they are cached per file under --cache (keyed
by the file, its rows and the harness's constants; a peer mended since, stream_sbs.PEER_REVISION,
in a file of its own); outlierd is replayed every run. Detectors:
"outlierd recent" (scores.recent of the default config, or of --config), "outlierd NAME
recent" for each --also-config, and the peers (HST, IForest, ECOD, MAD-z, PCA; on NAB also NAB's
windowedGaussian). The report gives each half's figures (standard / reward low FP / reward low
FN), the best peer on each profile and outlierd's lead (negative: a gap).

Halves (which data chose what: docs/BENCHMARKS.md §12.1): SKAB even (file numbers 0, 2, ...)
chose, odd is held out; NAB "in" (even CRC-32 of the path) chose, "out" is held out.
"""
import argparse
import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stream_sbs as sbs  # noqa: E402

HALVES = {"skab": ("even", "odd", "all"), "nab": ("in", "out", "all")}
PROFILES = ("standard", "reward_low_FP_rate", "reward_low_FN_rate")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="skab", help="skab, nab (comma-separated; default skab)")
    ap.add_argument("--nab", default=os.environ.get("OUTLIERD_NAB", sbs.NAB_DEFAULT))
    ap.add_argument("--skab", default=os.environ.get("OUTLIERD_SKAB", sbs.SKAB_DEFAULT))
    ap.add_argument("--config", default="", help="config of the \"outlierd\" detector (default: none, pipeline.Default())")
    ap.add_argument("--also-config", action="append", default=[], metavar="NAME=FILE",
                    help="outlierd again with config FILE as \"outlierd NAME\" (repeatable; on every set)")
    ap.add_argument("--binary", default="", help="outlierd binary to replay (default: go build ./cmd/outlierd into bin/)")
    ap.add_argument("--combined", action="store_true", help="also score outlierd's combined score (not only scores.recent)")
    ap.add_argument("--only-ours", action="store_true", help="outlierd only (no peers)")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/outlierd/halves"), help="the peers' cached scores")
    ap.add_argument("--halves", default="", help="only these halves, e.g. even or even,in (default: every half of each set): keeps a held-out half unseen while a rule is chosen")
    ap.add_argument("--per-file", action="store_true",
                    help="also each file's NAB raw score at the corpus-wide threshold, for outlierd's first detector and the best peer "
                         "of each profile: false-positive rows before the file's first window and after one (their cost), "
                         "windows found and the first detection's position in its window (0: its first row) (docs/BENCHMARKS.md §12.16)")
    ap.add_argument("--markdown", action="store_true")
    return ap.parse_args()


def peer_scores(corpus, rel, df, feats, probation, cache):
    """Every peer's score on one file, from the cache when its key matches."""
    import numpy as np

    key = hashlib.sha256(json.dumps([corpus, rel, len(df), feats, probation, sbs.W_FIT, sbs.B_FIT, sbs.N_MAD,
                                     sbs.Z_MAD, sbs.HST_Q]).encode()).hexdigest()[:16]
    path = os.path.join(cache, f"{corpus}-{key}.npz")
    # a peer mended since (stream_sbs.PEER_REVISION) is kept in a file of its own, named by its
    # revision, so that neither this script nor an older one reads the other's scores for it
    revised = [p for p in sbs.PEERS if p in sbs.PEER_REVISION]
    rpath = os.path.join(cache, f"{corpus}-{key}-" + ",".join(f"{p}{sbs.PEER_REVISION[p]}" for p in revised) + ".npz")
    out = {}
    if os.path.exists(path):
        z = np.load(path)
        out = {k: z[k] for k in z.files if k not in revised}
    if revised and os.path.exists(rpath):
        z = np.load(rpath)
        out.update({k: z[k] for k in z.files})
    missing = [p for p in sbs.PEERS if p not in out]  # a peer added or mended since: computed alone
    if not missing and (corpus != "nab" or "NAB windowedGaussian" in out):
        return out
    X = df[feats].to_numpy(dtype=np.float64)
    new = {name: s for name, (s, _, _) in sbs.peers(X, probation, names=missing).items()}
    if corpus == "nab" and "NAB windowedGaussian" not in out:
        new["NAB windowedGaussian"] = sbs.windowed_gaussian(df["value"].to_numpy(dtype=np.float64))
    out.update(new)
    os.makedirs(cache, exist_ok=True)
    for where, mine in ((path, lambda k: k not in revised), (rpath, lambda k: k in revised)):
        if any(mine(k) for k in new):  # a file is written only when this call computed some of its peers
            np.savez(where + ".tmp.npz", **{k: v for k, v in out.items() if mine(k)})
            os.replace(where + ".tmp.npz", where)
    return out


def scores_of(corpus, files, binary, args):
    """detector -> per-file scores (NaN -> -inf), every file of the corpus, in files' order."""
    import numpy as np

    configs = [("outlierd", args.config)] + [tuple(["outlierd " + s.partition("=")[0], s.partition("=")[2]]) for s in args.also_config]
    dets = {}
    t0 = time.time()
    for rel, df, win in files:
        n = len(df)
        p = sbs.nab_probation(n)
        feats = [c for c in df.columns if c != "timestamp"]
        y = np.zeros(n, dtype=int)
        for a, b in win:
            y[((df["timestamp"] >= a) & (df["timestamp"] <= b)).to_numpy()] = 1
        with sbs.tempfile.TemporaryDirectory() as td:
            path = os.path.join(td, "f.csv")
            df[feats].assign(label=y).to_csv(path, index=False)
            for name, cfg in configs:
                ns = argparse.Namespace(config=cfg, replay_args="")
                score, _, _, recent = sbs.run_outlierd(binary, path, max(p, 2), ns)
                if recent is None:
                    raise SystemExit(f"halves: {name} on {rel}: no recent column (detect.recent_scores off?)")
                dets.setdefault(name + " recent", []).append(recent)
                if args.combined:
                    dets.setdefault(name, []).append(score)
        if not args.only_ours:
            for name, s in peer_scores(corpus, rel, df, feats, max(p, 2), args.cache).items():
                dets.setdefault(name, []).append(s)
    print(f"# {corpus}: {len(files)} files replayed and scored in {time.time() - t0:.0f} s", file=sys.stderr)
    return {d: [np.nan_to_num(np.asarray(s, dtype=np.float64), nan=-np.inf) for s in v] for d, v in dets.items()}


def per_file(sweeper, profiles, sub, dets, idx, det_names, md):
    """Where each detector's points go, file by file, at its corpus-wide threshold of each profile."""
    import numpy as np

    for prof in PROFILES:
        costs = profiles[prof]["CostMatrix"]
        cols = {}
        for det in det_names:
            unit = sbs.to_unit([dets[det][i] for i in idx])
            thr = sbs.nab_score(sweeper, costs, sub, unit)[0]
            sw = sweeper.Sweeper(probationPercent=0.15, costMatrix=costs)
            for (rel, df, win), u in zip(sub, unit):
                ts = list(df["timestamp"])
                pts = sw.calcSweepScore(ts, list(u), win, rel)
                m = sw.scoreDataSet(ts, list(u), win, rel, thr)[1]
                p, hit = int(np.ceil(sw._getProbationaryLength(len(ts)))), np.asarray(u) >= thr
                spans = [(ts.index(lo), ts.index(hi)) for lo, hi in win]
                a0 = spans[0][0] if spans else len(ts)
                outside = [i for i in range(p, len(ts)) if hit[i] and pts[i].windowName is None]
                pre, post = [i for i in outside if i < a0], [i for i in outside if i >= a0]
                firsts = [(hits[0] - lo) / (hi - lo + 1) for lo, hi in spans
                          for hits in [[i for i in range(max(p, lo), hi + 1) if hit[i]]] if hits]
                found = f"{len(firsts)}/{len(spans)}" + (f" at {sum(firsts) / len(firsts):.2f}" if firsts else "")
                cols.setdefault(rel, []).append(f"{m.score:+.2f}; {len(pre)} ({sum(pts[i].sweepScore for i in pre):+.2f}); "
                                                f"{len(post)} ({sum(pts[i].sweepScore for i in post):+.2f}); {found}")
        print(f"\n{prof}: raw score; FP rows before the first window (cost); FP rows after a window (cost); "
              "windows found at the threshold, at (mean) position in the window of the first detection (0: its first row)\n")
        sbs.table(["file"] + list(det_names), [[rel] + v for rel, v in cols.items()], md)


def main():
    args = parse_args()
    sbs.warnings.filterwarnings("ignore", category=RuntimeWarning, module="pyod")  # as stream_sbs.py: ECOD on flat windows
    binary = args.binary or os.path.join(sbs.ROOT, "bin", "outlierd")
    if not args.binary:
        sbs.subprocess.check_call(["go", "build", "-o", binary, "./cmd/outlierd"], cwd=sbs.ROOT)
    started = time.time()
    out, later = {}, []
    for corpus in filter(None, args.sets.split(",")):
        home = args.skab if corpus == "skab" else args.nab
        if corpus not in HALVES or not os.path.isdir(os.path.join(home, "data")) or not os.path.isdir(os.path.join(args.nab, "nab")):
            raise SystemExit(f"halves: {corpus}: need {home}/data and NAB's scorer in {args.nab}/nab (see stream_sbs.py's help)")
        sweeper = sbs.load_sweeper(args.nab)
        with open(os.path.join(args.nab, "config", "profiles.json")) as fh:
            profiles = json.load(fh)
        files = sbs.skab_corpus(args.skab, False) if corpus == "skab" else sbs.nab_corpus(args.nab, False)
        dets = scores_of(corpus, files, binary, args)
        for half in HALVES[corpus]:
            if args.halves and half not in args.halves.split(","):
                continue
            if half == "all":
                idx = list(range(len(files)))
            elif corpus == "skab":
                idx = [i for i, (rel, _, _) in enumerate(files) if int(rel.split("/")[1].split(".")[0]) % 2 == (0 if half == "even" else 1)]
            else:
                idx = [i for i, (rel, _, _) in enumerate(files) if sbs.nab_half(rel.replace(os.sep, "/")) == half]
            sub = [files[i] for i in idx]
            for det, scores in dets.items():
                r = sbs.nab_normalise(sweeper, profiles, sub, sbs.to_unit([scores[i] for i in idx]))
                out.setdefault((corpus, half), {})[det] = [r[p]["score"] for p in PROFILES]
            if args.per_file:
                peers = {d: v for d, v in out[(corpus, half)].items() if not d.startswith("outlierd")}
                ours = [d for d in out[(corpus, half)] if d.startswith("outlierd")][:1]
                best = list(dict.fromkeys(max(peers, key=lambda d: peers[d][k]) for k in range(3))) if peers else []
                later.append((f"{corpus} {half}", sweeper, profiles, sub, dets, idx, ours + best))
    commit = sbs.subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=sbs.ROOT, capture_output=True, text=True).stdout.strip()
    dirty = sbs.subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=sbs.ROOT, capture_output=True, text=True).stdout.strip()
    print(f"halves {' '.join(sys.argv[1:])}: commit {commit}{' (modified)' if dirty else ''}, "
          f"{time.strftime('%Y-%m-%d %H:%MZ', time.gmtime(started))}, load {os.getloadavg()[0]:.1f}, {time.time() - started:.0f} s\n")
    for (corpus, half), res in out.items():
        print(("#### " if args.markdown else "") + f"{corpus} {half}: NAB's scorer, standard / reward low FP / reward low FN\n")
        peers = {d: v for d, v in res.items() if not d.startswith("outlierd")}
        best = [max(peers.items(), key=lambda kv: kv[1][k]) if peers else None for k in range(3)]
        rows = []
        for det, v in sorted(res.items(), key=lambda kv: -kv[1][0]):
            cells = [det] + [f"{x:.1f}" for x in v]
            if det.startswith("outlierd") and peers:
                cells.append(" / ".join(f"{v[k] - best[k][1][k]:+.1f}" for k in range(3)))
            else:
                cells.append("")
            rows.append(cells)
        head = ["detector", "standard", "low FP", "low FN", "lead over the best peer (" + " / ".join(b[0] for b in best) + ")" if peers else "lead"]
        sbs.table(head, rows, args.markdown)
    for name, *rest in later:
        print(("#### " if args.markdown else "") + f"{name}: each file at its detector's corpus-wide threshold")
        per_file(*rest, args.markdown)


if __name__ == "__main__":
    sbs.ensure_venv(os.path.abspath(__file__))
    main()
