#!/usr/bin/env python3
"""Alarm rules on outlierd's own scores: the deadband (detect.flag_clear) against smoothed holds.

    python3 docs/bench/alarm_sim.py                     # TEP, SMAP and MSL; every rule below
    python3 docs/bench/alarm_sim.py --sets tep,smap,msl,gen    # and the generated streams (~75 s)
    python3 docs/bench/alarm_sim.py --sets tep --rules '["base",0.7];["mean",5,0.8]'

Why a simulation is exact here: under flag_by: significance a record is significant when its
combined score reaches min_score, and only significant records are kept out of the next models
(outcasts); a held record (detect.flag_clear) is flagged but not significant. So a rule that
changes only which non-significant records are held changes no model and no score: applied to
the scores a replay wrote, it gives the flags that replay would have written with it. Checked on
every run: the rule "base 0.7" (the default deadband) must reproduce the replay's own flags on
every row, cap included (alarm_rate x window of the last window's records; window 50,000).

Scores: `outlierd replay` with the default config through unseen.py's series_outputs (its cache,
its data: docs/bench/unseen.py's docstring), the binary built from this checkout or --binary.
Figures: TEP's own flags (fault detection rate of the 18 detectable faults, the false-alarm rate
of the fault runs' 160 pre-fault rows, the share of the normal run d00_te flagged) and SMAP/MSL's
telemanom event counts and F0.5 (unseen.py's scorers, imported).

Rules (a series' previous record flagged, a record below min_score stays flagged while ...):
  base c        its score is at least c x min_score (detect.flag_clear = c; the product's rule)
  mean m c      the mean of the series' last m scores (its own included) is at least c x min_score
  ewma l c      the exponentially weighted mean of the scores (weight l on the newest) is ...
  fisher m c    the last m scores' combined significance (Fisher's method: -log10 of the chance
                that m independent records' surprisals sum this high) is at least c x min_score
  cmean m c     mean's, each score's part capped at min_score (so that one spike cannot hold)
The choice rule (docs/BENCHMARKS.md §12.26; §12.25's for the deadband, TEP's pre-fault false
alarms at most 1 %, with the events of SMAP and MSL and the generated streams' targets added
after the first grid of base/mean/ewma/fisher on TEP, SMAP and MSL): a rule is a candidate where
TEP's pre-fault false-alarm rate stays at most 1 %, neither SMAP's nor MSL's event F0.5 falls,
the generated streams keep their targets (every spike flagged at precision >= 0.9, clean <= 0.1 %
and drift <= 1 % flagged) and a spike followed by ordinary records is not extended (flag_clear's
documented property); then the highest TEP detection rate. SKAB is not read here.

    --sets gen   stream_sbs.py's generated streams (outlierd gen, each replayed once; the fleet
                 per key, each key's own series and cap of detect.keys.window records)
"""
import argparse
import hashlib
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stream_sbs as sbs  # noqa: E402
import unseen  # noqa: E402

MIN_SCORE, WINDOW, ALARM_RATE = 5.0, 50000, 0.02  # pipeline.Default()'s detect section

RULES = [("base", 0.7), ("base", 0.5), ("base", 0.8)] + \
    [("mean", m, c) for m in (3, 5, 10, 20) for c in (0.7, 0.8, 0.9)] + \
    [("cmean", m, c) for m in (5, 10, 20) for c in (0.6, 0.7, 0.8)] + \
    [("ewma", lam, c) for lam in (0.2, 0.3, 0.5) for c in (0.7, 0.8, 0.9)] + \
    [("fisher", m, c) for m in (5, 10) for c in (1.0, 1.5, 3.0, 6.0)]


def fisher_significance(window):
    """-log10 of P(Gamma(m, 1) >= sum of the m scores in nats): Fisher's combined p-value."""
    from scipy.stats import gamma

    return -math.log10(max(gamma.sf(math.log(10) * sum(window), len(window)), 1e-300))


def alarm(scores, rule, window=WINDOW):
    """The flags of one series under rule, in stream order, with the cap (of a window of window)."""
    import numpy as np

    kind, limit = rule[0], max(1, int(ALARM_RATE * window))
    flags = np.zeros(len(scores), dtype=bool)
    ring = np.zeros(window, dtype=bool)
    count, prev, ew, hist = 0, False, 0.0, []
    for i, s in enumerate(scores):
        x = float(s) if np.isfinite(s) else 0.0
        hist.append(x)
        if kind == "ewma":
            ew = x if i == 0 else rule[1] * x + (1 - rule[1]) * ew
        if kind == "base":
            level = x
        elif kind == "mean":
            level = sum(hist[-rule[1]:]) / len(hist[-rule[1]:])
        elif kind == "cmean":  # each score's part capped at min_score: one spike cannot hold
            level = sum(min(v, MIN_SCORE) for v in hist[-rule[1]:]) / len(hist[-rule[1]:])
        elif kind == "ewma":
            level = ew
        elif kind == "fisher":
            level = fisher_significance(hist[-rule[1]:]) if prev else 0.0
        else:
            raise SystemExit(f"alarm_sim: unknown rule {rule!r}")
        hist = hist[-32:]
        want = x >= MIN_SCORE or prev and level >= rule[-1] * MIN_SCORE
        j = i % window
        if i >= window and ring[j]:
            count -= 1
        flag = want and count < limit
        ring[j], flags[i], prev = flag, flag, flag
        count += flag
    return flags


KEYS_WINDOW = 200  # detect.keys.window's default: a key's cap counts over its last 200 records


def generated(binary):
    """stream_sbs.py's generated streams: (name, y, keys or None, score, flags) after the probation."""
    import argparse as ap
    import tempfile

    import numpy as np
    import pandas as pd

    out = []
    with tempfile.TemporaryDirectory() as td:
        for name, gargs, _ in sbs.STREAMS:
            path = os.path.join(td, f"{name}.csv")
            with open(path, "w") as fh:
                subprocess.check_call([binary, "gen", "--kind", "sensors", "--head", str(sbs.P_GEN)] + gargs.split(), stdout=fh)
            df = pd.read_csv(path)
            keys = df["key"].to_numpy() if "key" in df.columns else None
            score, flags, _, _ = sbs.run_outlierd(binary, path, sbs.P_GEN, ap.Namespace(config="", replay_args=""), "key" if keys is not None else None)
            ev = slice(sbs.P_GEN, None)
            out.append((name, df["label"].to_numpy(dtype=int)[ev], None if keys is None else keys[ev], score[ev], flags[ev]))
    return out


def alarm_keyed(scores, keys, rule):
    """alarm per key (each key's own series and cap), scattered back; the stream's without keys."""
    import numpy as np

    if keys is None:
        return alarm(scores, rule)
    flags = np.zeros(len(scores), dtype=bool)
    for k in np.unique(keys):
        idx = np.flatnonzero(keys == k)
        flags[idx] = alarm(scores[idx], rule, KEYS_WINDOW)
    return flags


def load(sets, binary, cache):
    with open(binary, "rb") as fh:
        bin_hash = hashlib.sha256(fh.read()).hexdigest()[:16]
    out = {}
    for name in sets:
        if name == "tep":
            src = unseen.tep(unseen.TEP_DEFAULT)
        elif name == "gen":
            out[name] = generated(binary)
            continue
        elif name in ("smap", "msl"):
            src = unseen.smap_msl(os.environ.get("OUTLIERD_SMAP_MSL", unseen.SMAP_MSL_DEFAULT), name.upper())
        else:
            raise SystemExit(f"alarm_sim: --sets: unknown set {name!r} (tep, smap, msl)")
        out[name] = [(sid, y, segs, unseen.series_outputs(sid, tr, te, y, binary, bin_hash, "", cache)[0])
                     for sid, tr, te, y, segs in src]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="tep,smap,msl")
    ap.add_argument("--binary", default="", help="outlierd binary (default: go build ./cmd/outlierd into bin/)")
    ap.add_argument("--rules", default="", help='JSON lists separated by ";", e.g. \'["mean",5,0.8]\' (default: RULES)')
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~/.cache/outlierd"), "unseen"))
    args = ap.parse_args()
    binary = args.binary or os.path.join(sbs.ROOT, "bin", "outlierd")
    if not args.binary:
        subprocess.check_call(["go", "build", "-o", binary, "./cmd/outlierd"], cwd=sbs.ROOT)
    rules = [tuple(json.loads(r)) for r in args.rules.split(";")] if args.rules else RULES
    data = load(args.sets.split(","), binary, args.cache)
    for name, series in data.items():
        # (gen: the fleet's warming records are under the global model's cap of a window of 50,000
        # and held by their key's series there, its warm ones under their key's cap, which starts
        # anew at the key's model: the simulation's one series and cap a key may differ a little)
        if name == "gen":
            for g, y, keys, score, flags in series:
                same = int((alarm_keyed(score, keys, ("base", 0.7)) == flags).sum())
                print(f"# gen {g}: the default deadband reproduces the replay's flags on {same} of {len(y)} rows")
            continue
        same = sum(int((alarm(o["outlierd"][0], ("base", 0.7)) == o["outlierd"][1]).sum()) for _, _, _, o in series)
        rows = sum(len(y) for _, y, _, _ in series)
        print(f"# {name}: the default deadband reproduces the replay's flags on {same} of {rows} rows")
        if same != rows:
            raise SystemExit("alarm_sim: the simulation does not match the binary's alarm (its defaults changed?)")
    head = ["rule"]
    for name in data:
        if name == "gen":
            head += [f"{g} {'flagged' if g in ('clean', 'drift') else 'P/R'}" for g, *_ in series]
            continue
        head += ["TEP FDR 18", "FAR pre-fault", "d00_te flagged"] if name == "tep" else [f"{name.upper()} events TP/FN/FP", f"{name.upper()} F0.5"]
    rows = []
    for rule in rules:
        row = [" ".join(str(v) for v in rule)]
        for name, series in data.items():
            if name == "gen":
                for g, y, keys, score, _ in series:
                    f = alarm_keyed(score, keys, rule)
                    m = sbs.evaluate(score, f, y)
                    row.append(f"{100 * m['share']:.2f} %" if g in ("clean", "drift") else f"{m['precision']:.3f}/{m['recall']:.3f}")
                continue
            sim = [(sid, y, segs, {"sim": (o["outlierd"][0], alarm(o["outlierd"][0], rule))}, {"sim": 0.0}) for sid, y, segs, o in series]
            if name == "tep":
                r = unseen.score_tep(sim, ["sim"])["sim"]
                row += [sbs.fmt(r["flag_fdr_18"]), f"{100 * r['flag_far']:.2f} %", sbs.fmt(r["flag_d00"])]
            else:
                r = unseen.score_set(sim, ["sim"])["sim"]
                row += [f"{r['ev_tp']}/{r['ev_fn']}/{r['ev_fp']}", sbs.fmt(r["ev_f05"])]
        rows.append(row)
        print(" | ".join(row), file=sys.stderr, flush=True)
    print()
    sbs.table(head, rows, True)


if __name__ == "__main__":
    sbs.ensure_venv(__file__)
    main()
