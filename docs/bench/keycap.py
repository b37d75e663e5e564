#!/usr/bin/env python3
"""A key's alarm cap under detect.key_by: key on a fleet whose sensors shift (docs/BENCHMARKS.md §13.3).

    python3 docs/bench/keycap.py --binary main=bin/outlierd [--binary new=/tmp/outlierd-new ...]
        [--sets choice,heldout,guards] [--config FILE] [--raw out.jsonl] [--markdown]

Streams (`outlierd gen --kind sensors`, the fleet of §12.27): 5 keys of one sensor at 70 +- 2,
--head 2000, 40,000 rows, 0.05 % spikes of +20..+30, 4 level shifts of --shift-size sd lasting
--shift-length of their key's records; `outlierd replay --input F --key-column key --key-by key
--label-column label --min-records 2000 --json --verdicts-out V`.

  choice   seeds 3, 4, 5 x shift size 6, 15 x shift length 100, 300 (12 streams): what the rule
           was chosen on.
  heldout  seeds 7, 8, 9, the same sizes and lengths: reported only.
  guards   the fleet of stream_sbs.py under key_by key (its `fleet` stream, its evaluate(): rows
           after the probation); joinfleet.py's seeds 3-5 (replay's figures); the clean fleet (the same gen, --spike-rate 0 --shifts 0) at
           40,000 and 200,000 rows; the drifting clean fleet (--drift 1 --drift-every 1000: 1 sd
           per keys.window of each of the 5 keys; --drift-every 5000): the share flagged.
  stress   report only, found after the rule was chosen: faster drifts (5 to 20 sd a key's
           window), 200 keys, and §12.29's fleet of 100 keys with 40 shifts.
  none     the choice streams under key_by none (the stage's cap: unchanged by a key's rule).

--config FILE goes to every `outlierd replay` the script runs (the guards' stream_sbs fleet
too); without it, none (pipeline.Default()). `first window` and `return` count over 200 records of a
key (KEYS_WINDOW, the default keys.window) whatever the config's window, so configs compare.

Figures per stream: replay's own flags, precision, recall, F1 and average precision (its JSON),
and from the verdicts: `first window`, the share of each shift's first min(length, keys.window)
records flagged; `return`, the flags on label-0 records of a shifted key within keys.window of
its records after the shift's end (the return to normal after a shift its model learnt).

The rule was chosen before any held-out figure was looked at: among the candidates that pass
every guard (the stream_sbs fleet row no worse than main's flags' F1 - 0.005, the clean fleets at
most 0.1 % flagged, the drifting ones at most 1 %), the highest mean F1 over the 12 choice
streams; within 0.01 of it, the fewer return flags.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CACHE = os.path.expanduser("~/.cache/outlierd/keycap")
KEYS_WINDOW = 200
CONFIG = ""  # --config: given to every outlierd replay
P = 2000
FLEET = ("--kind sensors --head 2000 --keys 5 --sensors 1 --baseline-min 70 --baseline-max 70 "
         "--noise-min 2 --noise-max 2")
SHIFTS = FLEET + " --rows 40000 --spike-rate 0.0005 --spike-min 20 --spike-max 30 --shifts 4"
SEEDS = {"choice": (3, 4, 5), "heldout": (7, 8, 9)}
SIZES, LENGTHS = (6, 15), (100, 300)


def gen(binary, args):
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, args.replace(" ", "").replace("--", "_") + ".csv")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as fh:
            subprocess.check_call([binary, "gen"] + args.split(), stdout=fh)
        os.rename(path + ".tmp", path)
    return path


def replay(binary, path, key_by="key"):
    with tempfile.TemporaryDirectory() as td:
        v = os.path.join(td, "v.csv")
        out = subprocess.run([binary, "replay", "--input", path, "--key-column", "key", "--key-by", key_by,
                              "--label-column", "label", "--min-records", str(P), "--json", "--verdicts-out", v]
                             + (["--config", CONFIG] if CONFIG else []),
                             capture_output=True, text=True, check=True)
        res = json.loads(out.stdout)
        with open(v) as fh:
            flags = [r["outlier"].lower() == "true" for r in csv.DictReader(fh)]
    return res, flags


def shift_figures(path, flags):
    """first-window share flagged over the shifts, and the return flags (see the doc)."""
    with open(path) as fh:
        rows = [(r["key"], int(r["label"])) for r in csv.DictReader(fh)]
    by_key = {}
    for i, (k, l) in enumerate(rows):
        by_key.setdefault(k, []).append((i, l))
    first_hit = first_n = ret = 0
    for recs in by_key.values():
        j = 0
        while j < len(recs):
            if not recs[j][1]:
                j += 1
                continue
            s = j
            while j < len(recs) and recs[j][1]:
                j += 1
            if j - s < 2:  # a spike
                continue
            head = recs[s:s + min(j - s, KEYS_WINDOW)]
            first_n += len(head)
            first_hit += sum(flags[i] for i, _ in head)
            ret += sum(flags[i] and not l for i, l in recs[j:j + KEYS_WINDOW])
    return (first_hit / first_n if first_n else float("nan")), ret


def shift_set(binaries, which, key_by="key"):
    gb = next(iter(binaries.values()))
    out = []
    for seed in SEEDS[which]:
        for size in SIZES:
            for length in LENGTHS:
                path = gen(gb, f"{SHIFTS} --shift-size {size} --shift-length {length} --seed {seed}")
                for name, b in binaries.items():
                    res, flags = replay(b, path, key_by)
                    fw, ret = shift_figures(path, flags)
                    out.append({"set": which, "seed": seed, "size": size, "length": length, "binary": name,
                                "key_by": key_by, "flagged": res["flagged"], "precision": res.get("precision"),
                                "recall": res.get("recall"), "f1": res.get("f1"),
                                "ap": res.get("average_precision"), "first_window": fw, "return": ret})
                    print(json.dumps(out[-1]), file=sys.stderr)
    return out


def guards(binaries):
    sys.path.insert(0, HERE)
    import numpy as np
    import stream_sbs

    gb = next(iter(binaries.values()))
    out = []
    fleet = next(g for n, g, _ in stream_sbs.STREAMS if n == "fleet")
    path = gen(gb, f"--kind sensors --head {P} {fleet}")
    y = None
    with open(path) as fh:
        y = np.array([int(r["label"]) for r in csv.DictReader(fh)])
    ns = argparse.Namespace(config=CONFIG, replay_args="--key-by key")
    for name, b in binaries.items():
        score, flags, _, _ = stream_sbs.run_outlierd(b, path, P, ns, "key")
        m = stream_sbs.evaluate(score[P:], flags[P:], y[P:])
        out.append({"set": "guard", "stream": "stream_sbs fleet", "binary": name, **m})
        print(json.dumps(out[-1]), file=sys.stderr)
    for label, args, most in (
            ("clean 40,000", f"{FLEET} --rows 40000 --spike-rate 0 --shifts 0 --seed 3", 0.001),
            ("clean 200,000", f"{FLEET} --rows 200000 --spike-rate 0 --shifts 0 --seed 3", 0.001),
            ("drift 1 sd / 1,000 rows", f"{FLEET} --rows 40000 --spike-rate 0 --shifts 0 --drift 1 --drift-every 1000 --seed 3", 0.01),
            ("drift 1 sd / 5,000 rows", f"{FLEET} --rows 40000 --spike-rate 0 --shifts 0 --drift 1 --drift-every 5000 --seed 3", 0.01)):
        path = gen(gb, args)
        for name, b in binaries.items():
            res, flags = replay(b, path)
            share = sum(flags) / len(flags)
            out.append({"set": "guard", "stream": label, "binary": name, "flagged": sum(flags),
                        "share": share, "most": most, "ok": share <= most})
            print(json.dumps(out[-1]), file=sys.stderr)
    for seed in (3, 4, 5):  # joinfleet.py: sensors joining with a fault under way (§12.29)
        path = os.path.join(CACHE, f"joinfleet-{seed}.csv")
        if not os.path.exists(path):
            with open(path, "w") as fh:
                subprocess.check_call([sys.executable, os.path.join(HERE, "joinfleet.py"), str(seed)], stdout=fh)
        for name, b in binaries.items():
            res, _ = replay(b, path)
            out.append({"set": "guard", "stream": f"joinfleet seed {seed}", "binary": name, "flagged": res["flagged"],
                        "precision": res.get("precision"), "recall": res.get("recall"), "ap": res.get("average_precision")})
            print(json.dumps(out[-1]), file=sys.stderr)
    return out


def stress(binaries):
    """Report only (found after the rule was chosen): drifts faster than the guards' and a fleet of
    100 keys; the share flagged, and replay's figures where labelled."""
    gb = next(iter(binaries.values()))
    out = []
    big = "--kind sensors --head 2000 --rows 200000 --keys 200 --spike-rate 0"
    for label, args in (
            ("drift 1 sd / 200 rows (5 keys: 5 sd a key's window)", f"{FLEET} --rows 40000 --spike-rate 0 --shifts 0 --drift 1 --drift-every 200 --seed 3"),
            ("drift 1 sd / 50 rows (5 keys: 20 sd a key's window)", f"{FLEET} --rows 40000 --spike-rate 0 --shifts 0 --drift 1 --drift-every 50 --seed 3"),
            ("200 keys x 3 sensors, drift 1 sd / 5,000 rows (8 sd a key's window)", f"{big} --sensors 3 --drift 1 --drift-every 5000 --seed 6"),
            ("200 keys x 1 sensor, drift 1 sd / 25,000 rows (1.6 sd a key's window)", f"{big} --sensors 1 --drift 1 --drift-every 25000 --seed 6"),
            ("100 keys, 40 shifts of +6 sd x 300, seed 3", f"{SHIFTS.replace('--keys 5', '--keys 100').replace('--shifts 4', '--shifts 40')} --shift-size 6 --shift-length 300 --seed 3")):
        path = gen(gb, args)
        for name, b in binaries.items():
            res, flags = replay(b, path)
            out.append({"set": "stress", "stream": label, "binary": name, "flagged": sum(flags), "share": sum(flags) / len(flags),
                        "precision": res.get("precision"), "recall": res.get("recall"), "f1": res.get("f1")})
            print(json.dumps(out[-1]), file=sys.stderr)
    return out


def fmt(v, d=3):
    return "-" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))


def report(rows, names, md):
    bar = "|" if md else " "
    shifts = [r for r in rows if "seed" in r]
    for which in ("choice", "heldout"):
        part = [r for r in shifts if r["set"] == which]
        if not part:
            continue
        print(f"\n{which}: flags, P / R / F1, AP, first window flagged, return flags")
        names_here = [n for n in names if any(r["binary"] == n for r in part)]
        head = ["seed", "size", "length"] + names_here
        print(bar.join(head))
        if md:
            print("|".join(["---"] * len(head)))
        keys = sorted({(r["seed"], r["size"], r["length"]) for r in part})
        for k in keys:
            cells = [str(x) for x in k]
            for n in names_here:
                r = next((r for r in part if (r["seed"], r["size"], r["length"]) == k and r["binary"] == n), None)
                cells.append("-" if r is None else f"{r['flagged']}, {fmt(r['precision'])} / {fmt(r['recall'])} / {fmt(r['f1'])}, "
                             f"{fmt(r['ap'])}, {fmt(r['first_window'], 2)}, {r['return']}")
            print(bar.join(cells))
        cells = ["mean", "", ""]
        for n in names_here:
            rs = [r for r in part if r["binary"] == n]
            mean = lambda f: sum((r[f] or 0) for r in rs) / len(rs)
            cells.append(f"{sum(r['flagged'] for r in rs)} flags, F1 {mean('f1'):.3f}, first window {mean('first_window'):.2f}, "
                         f"return {sum(r['return'] for r in rs)}")
        print(bar.join(cells))
    stream_block(rows, "stress", "stress (report only): flags (share), P / R / F1 where labelled", names, bar,
                 lambda s, r: f"{r['flagged']} ({100 * r['share']:.3f} %)"
                 + (f", {fmt(r['precision'])} / {fmt(r['recall'])} / {fmt(r['f1'])}" if "shifts" in s else ""))
    stream_block(rows, "guard", "guards", names, bar,
                 lambda s, r: f"{r['flagged']} flags, {fmt(r['precision'])} / {fmt(r['recall'])}, AP {fmt(r['ap'])}" if "ap" in r
                 else f"{r['flagged']} ({100 * r['share']:.3f} %){'' if r['ok'] else ' OVER'}")


def stream_block(rows, which, title, names, bar, cell):
    """The rows of set `which`: a line a stream, a cell a binary, `name: cell(stream, row)`."""
    part = [r for r in rows if r["set"] == which]
    if not part:
        return
    print(f"\n{title}")
    for s in dict.fromkeys(r["stream"] for r in part):
        cells = [s]
        for n in [n for n in names if any(r["binary"] == n for r in part)]:
            r = next(r for r in part if r["stream"] == s and r["binary"] == n)
            cells.append(f"{n}: {cell(s, r)}")
        print(bar.join(cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--sets", default="choice,guards", help="choice, heldout, guards, stress, none (key_by none on the choice streams)")
    ap.add_argument("--config", default="", help="pipeline config for every outlierd replay (default: none, pipeline.Default())")
    ap.add_argument("--raw", default="", help="append every figure as JSON lines here")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    global CONFIG
    CONFIG = args.config
    binaries = dict(b.split("=", 1) for b in args.binary)
    sets = args.sets.split(",")
    rows = []
    for which in ("choice", "heldout"):
        if which in sets:
            rows += shift_set(binaries, which)
    if "none" in sets:
        rows += [dict(r, binary=r["binary"] + " (key_by none)") for r in shift_set(binaries, "choice", "none")]
    if "guards" in sets:
        rows += guards(binaries)
    if "stress" in sets:
        rows += stress(binaries)
    if args.raw:
        with open(args.raw, "a") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
    names = list(dict.fromkeys(r["binary"] for r in rows))
    report(rows, names, args.markdown)


if __name__ == "__main__":
    main()
