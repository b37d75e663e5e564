#!/usr/bin/env python3
"""GECCO Industrial Challenges 2018 and 2017 (drinking-water quality): the organisers' R files into the
CSVs `unseen.py --sets gecco2018` and `--sets gecco2017` read.

    python3 docs/bench/gecco2018_convert.py [--dir ~/.cache/outlierd/unseen5/gecco2018]
    python3 docs/bench/gecco2018_convert.py --set 2017 [--dir ~/.cache/outlierd/unseen5/gecco2017]

Reads geccoIC2018Train.rda and geccoIC2018Test.rda from --dir, as github.com/frehbach/EventDetectR's
data/ holds them (the organisers' R package, GPL-3; commit 7c4cc4a3):
    git clone https://github.com/frehbach/EventDetectR
    cp EventDetectR/data/geccoIC2018T*.rda ~/.cache/outlierd/unseen5/gecco2018/
and writes train.csv and test.csv beside them: Time, the 9 sensors, EVENT (0/1), every row as the
.rda holds it (missing values left empty; unseen.py's gecco2018() applies the protocol's rule).
2017 (--set 2017): the 2017 challenge's labelled training data, waterDataTraining.RDS (its resource
package's ResourcePackage/source/R/Framework/Data/; copied from github.com/JohnAnih/
Anomaly-detection-research at f527abe0), into data.csv the same way (its flow columns, integers
with gaps, become numbers).
The files' sha256 are checked against the copy docs/bench/notes/unseen5_protocol.md names.
Needs pyreadr (docs/bench/requirements.txt) in the bench venv.
"""
import argparse
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stream_sbs as sbs  # noqa: E402

DEFAULT = os.path.expanduser("~/.cache/outlierd/unseen5/gecco{}")
FILES = {  # the copies the protocol names: {output part: (file, sha256)}
    "2018": {"train": ("geccoIC2018Train.rda", "10d1823c241f4db368605a5ccc2b4ee9ede6c0ef18632c21a73683678455ce0f"),
             "test": ("geccoIC2018Test.rda", "0621358cd6dbcaa1bef62dee4d61c8af90fc1121ceb7c3aa8153bb7bcd7687d1")},
    "2017": {"data": ("waterDataTraining.RDS", "2c476ff9c0e8e569341c3c7ffeef529ebbb6d369c95e7c63be101e6dbaef129f")},
}
COLUMNS = ["Time", "Tp", "Cl", "pH", "Redox", "Leit", "Trueb", "Cl_2", "Fm", "Fm_2", "EVENT"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", default="2018", choices=sorted(FILES))
    ap.add_argument("--dir", default="", help="default $OUTLIERD_GECCO<set> or ~/.cache/outlierd/unseen5/gecco<set>")
    args = ap.parse_args()
    args.dir = args.dir or os.environ.get(f"OUTLIERD_GECCO{args.set}", DEFAULT.format(args.set))
    import pandas as pd

    try:
        import pyreadr
    except ImportError:
        raise SystemExit("gecco2018_convert: needs pyreadr in the bench venv (pip install pyreadr==0.5.8)")
    for part, (name, want) in FILES[args.set].items():
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
        sensors = COLUMNS[1:-1]
        df = df.assign(**{c: pd.to_numeric(df[c], errors="raise") for c in sensors}, EVENT=df["EVENT"].astype(int))
        out = os.path.join(args.dir, f"{part}.csv")
        df.to_csv(out + ".tmp", index=False)
        os.replace(out + ".tmp", out)
        print(f"{out}: {len(df)} rows, {int(df['EVENT'].sum())} EVENT rows")


if __name__ == "__main__":
    sbs.ensure_venv(__file__)
    main()
