#!/usr/bin/env python3
"""Writes docs/bench/derive_std_golden.csv: the rolling spread of ingest.derive's `std` kind
(last 16), computed here independently of the Go code, for
stages/ingest/derive_std_test.go's TestDeriveStdGolden to pin bit for bit.

The definition (docs/OPERATIONS.md, "Time context: derived features"): over the series' last
`last` values, the current one included (fewer at the series' start: those seen), in float64
from the float32 values, oldest first. A full window (n = last): its mean = sum / n; the two
values farthest from it (by |x - mean|, the oldest of a tie) are left out; of the m = n - 2
others, mean' = sum / m, then the sample standard deviation sqrt(sum((x - mean')^2) / (m -
1)). A window still filling (n < last): the sample standard deviation of all n, two passes the
same way; 0 for a series' first value. The result rounded to float32. Summed in plain sequential
float64 (Python's float), the order the definition fixes; numpy's pairwise sum is used only as
a cross-check (to 1e-9 relative, a different summation order).

    python3 docs/bench/derive_std_golden.py > docs/bench/derive_std_golden.csv
"""
import math
import random
import struct

LAST = 16
OUT = 2  # the values left out


def f32(v):
    """v rounded to float32 (round half to even, as Go's float32(v)), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def series():
    """600 values: the filling start, ordinary noise, a flat run at an ordinary value (stuck:
    exactly 0 once the window holds it alone), values near 1e6 with a spread of 0.1 (a running
    sum of squares would cancel there), an oscillation burst, a spike, values float32 rounds."""
    r = random.Random(26)
    xs = []
    for _ in range(100):
        xs.append(70 + 2 * r.gauss(0, 1))
    stuck = xs[-1]
    xs += [stuck] * 60
    for _ in range(100):
        xs.append(1e6 + 0.1 * r.gauss(0, 1))
    xs += [1e6 + 0.0625] * 40  # a flat run far from zero
    for i in range(120):
        xs.append(70 + 2 * r.gauss(0, 1) + 6 * math.sin(2 * math.pi * i / 8))
    for i in range(180):
        xs.append(0.1 * i + r.gauss(0, 1) + (300 if i == 90 else 0))
    return [f32(x) for x in xs]


def main():
    xs = series()
    assert len(xs) == 600
    print("# derive_std_golden.py: x, then std (last 16) of x as float32 bits (hex)")
    print("x,std16")
    for i, x in enumerate(xs):
        w = xs[max(0, i + 1 - LAST):i + 1]
        n = len(w)
        sd = 0.0
        kept = []
        if n == LAST:
            s = 0.0
            for v in w:
                s += v
            m = s / n
            # the OUT largest |x - m|, the oldest first among equals: a stable sort by
            # decreasing distance (Python's sort is stable)
            out = sorted(range(n), key=lambda j: -abs(w[j] - m))[:OUT]
            kept = [v for j, v in enumerate(w) if j not in out]
            s = 0.0
            for v in kept:
                s += v
            m = s / len(kept)
            ss = 0.0
            for v in kept:
                d = v - m
                ss += d * d
            sd = math.sqrt(ss / (len(kept) - 1))
        elif n > 1:  # the window still filling: those seen, whole
            kept = w
            s = 0.0
            for v in w:
                s += v
            m = s / n
            ss = 0.0
            for v in w:
                d = v - m
                ss += d * d
            sd = math.sqrt(ss / (n - 1))
        try:
            import numpy as np
            ref = float(np.std(np.array(kept, dtype=np.float64), ddof=1)) if kept else 0.0
            assert abs(ref - sd) <= 1e-9 * max(abs(ref), 1e-300) or ref == sd, (i, ref, sd)
        except ImportError:
            pass
        print(f"{x!r},{bits(f32(sd)):08x}")


if __name__ == "__main__":
    main()
