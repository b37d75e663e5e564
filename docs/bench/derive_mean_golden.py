#!/usr/bin/env python3
"""Writes docs/bench/derive_mean_golden.csv: the rolling mean of ingest.derive's `mean` kind
with `trim: 2` (last 16) and its uncertainty, computed here independently of the Go code, for
stages/ingest/derive_meantrim_test.go's TestDeriveMeanGolden to pin bit for bit.

The definition (docs/OPERATIONS.md, "Time context: derived features"; stages/ingest/derive_mean.go):
over the series' last `last` values, the current one included (fewer at the series' start:
those seen), the float32 values taken exactly. A full window (n = last; trim 2, last >= 4): the two
values farthest from its exact mean (by |x - mean|, the oldest of a tie) are left out, as for
std (derive_std_golden.py); the mean of the m others exactly, rounded once to the nearest
float64, then to float32. A window still filling: the mean of all n. Its sd: sqrt(sum of the
kept values' sd^2 / m^2), the quotient exact and rounded once to float64, its float64 sqrt,
then float32. Exact rationals here (Python's Fraction; its float() rounds to nearest), wide
integers in Go (derive_wide.go).

    python3 docs/bench/derive_mean_golden.py > docs/bench/derive_mean_golden.csv
"""
import math
import random
import struct
import sys
from fractions import Fraction

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from derive_std_golden import f32, bits, series  # noqa: E402

LAST = 16
OUT = 2  # the values left out


def mean_exact(w, e, full):
    """The mean of the window w (oldest first) and its sd (e the values' sds), as floats."""
    q = [Fraction(v) for v in w]
    n = len(q)
    keep = list(range(n))
    if full:
        mean = sum(q) / n
        out = sorted(range(n), key=lambda j: -abs(q[j] - mean))[:OUT]  # stable: oldest first
        keep = [j for j in keep if j not in out]
    m = len(keep)
    mean = float(sum(q[j] for j in keep) / m)
    sd = math.sqrt(float(sum(Fraction(e[j]) ** 2 for j in keep) / (m * m)))
    return mean, sd


def main():
    xs = series()
    assert len(xs) == 600
    r = random.Random(27)
    es = [f32(r.uniform(0.05, 3)) for _ in xs]
    es[300] = f32(1e-30)  # a tiny sd beside ordinary ones
    print("# derive_mean_golden.py: x, its sd, then mean (last 16, trim 2) of x and its sd as float32 bits (hex)")
    print("x,sd,mean16,sd16")
    for i, x in enumerate(xs):
        lo = max(0, i + 1 - LAST)
        mean, sd = mean_exact(xs[lo:i + 1], es[lo:i + 1], i + 1 - lo == LAST)
        print(f"{x!r},{es[i]!r},{bits(f32(mean)):08x},{bits(f32(sd)):08x}")


if __name__ == "__main__":
    main()
