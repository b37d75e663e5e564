#!/usr/bin/env python3
"""GECCO Industrial Challenge 2018 (drinking-water quality): the organisers' .rda files into the CSVs
`unseen.py --sets gecco2018` reads.

    python3 docs/bench/gecco2018_convert.py [--dir ~/.cache/outlierd/unseen5/gecco2018]

Reads geccoIC2018Train.rda and geccoIC2018Test.rda from --dir, as github.com/frehbach/EventDetectR's
data/ holds them (the organisers' R package, GPL-3; commit 7c4cc4a3):
    git clone https://github.com/frehbach/EventDetectR
    cp EventDetectR/data/geccoIC2018T*.rda ~/.cache/outlierd/unseen5/gecco2018/
and writes train.csv and test.csv beside them: Time, the 9 sensors, EVENT (0/1), every row as the
.rda holds it (missing values left empty; unseen.py's gecco2018() applies the protocol's rule).
The .rda files' sha256 are checked against the copy docs/bench/notes/unseen5_protocol.md names.
Needs pyreadr (docs/bench/requirements.txt) in the bench venv.
"""
import argparse
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stream_sbs as sbs  # noqa: E402

DEFAULT = os.path.expanduser("~/.cache/outlierd/unseen5/gecco2018")
FILES = {  # the copy the protocol names (EventDetectR 7c4cc4a3)
    "train": ("geccoIC2018Train.rda", "10d1823c241f4db368605a5ccc2b4ee9ede6c0ef18632c21a73683678455ce0f"),
    "test": ("geccoIC2018Test.rda", "0621358cd6dbcaa1bef62dee4d61c8af90fc1121ceb7c3aa8153bb7bcd7687d1"),
}
COLUMNS = ["Time", "Tp", "Cl", "pH", "Redox", "Leit", "Trueb", "Cl_2", "Fm", "Fm_2", "EVENT"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=os.environ.get("OUTLIERD_GECCO2018", DEFAULT))
    args = ap.parse_args()
    try:
        import pyreadr
    except ImportError:
        raise SystemExit("gecco2018_convert: needs pyreadr in the bench venv (pip install pyreadr==0.5.8)")
    for part, (name, want) in FILES.items():
        path = os.path.join(args.dir, name)
        with open(path, "rb") as fh:
            got = hashlib.sha256(fh.read()).hexdigest()
        if got != want:
            raise SystemExit(f"gecco2018_convert: {path}: sha256 {got}, not the protocol's copy {want}")
        frames = pyreadr.read_r(path)
        if len(frames) != 1:
            raise SystemExit(f"gecco2018_convert: {path}: {len(frames)} objects, want one data frame")
        df = next(iter(frames.values()))
        if list(df.columns) != COLUMNS:
            raise SystemExit(f"gecco2018_convert: {path}: columns {list(df.columns)}, want {COLUMNS}")
        df = df.assign(EVENT=df["EVENT"].astype(int))
        out = os.path.join(args.dir, f"{part}.csv")
        df.to_csv(out + ".tmp", index=False)
        os.replace(out + ".tmp", out)
        print(f"{out}: {len(df)} rows, {int(df['EVENT'].sum())} EVENT rows")


if __name__ == "__main__":
    sbs.ensure_venv(__file__)
    main()
