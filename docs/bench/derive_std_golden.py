#!/usr/bin/env python3
"""Writes docs/bench/derive_std_golden.csv: the rolling spread of ingest.derive's `std` kind
(last 16), computed here independently of the Go code, for
stages/ingest/derive_std_test.go's TestDeriveStdGolden to pin bit for bit.

The definition (docs/OPERATIONS.md, "Time context: derived features"; stages/ingest/derive_std.go):
over the series' last `last` values, the current one included (fewer at the series' start:
those seen), the float32 values taken exactly. A full window (n = last): the two values
farthest from its exact mean (by |x - mean|, the oldest of a tie) are left out; of the m = n - 2
others, the sample variance sum((x - mean')^2) / (m - 1) exactly, rounded once to the nearest
float64, its float64 sqrt, rounded to float32. A window still filling (n < last): the same over
all n; 0 for a series' first value. Computed here in exact rationals (Python's Fraction; its
float() rounds to nearest), the Go code in wide integers (derive_wide.go). Before stdfast27 the
definition was two float64 passes summed in order (trimstd26): on this series the bits are the
same. numpy's float64 std is used only as a cross-check (to 1e-9 relative).

    python3 docs/bench/derive_std_golden.py > docs/bench/derive_std_golden.csv
"""
import math
import random
import struct
from fractions import Fraction

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


def std_exact(w, full):
    """The std of the window w (oldest first), full or filling, as a Python float (float64)."""
    q = [Fraction(v) for v in w]  # float32 values, exact
    n = len(q)
    kept = q
    if full:
        mean = sum(q) / n
        # the OUT largest |x - mean|, the oldest first among equals: a stable sort by
        # decreasing distance (Python's sort is stable)
        out = sorted(range(n), key=lambda j: -abs(q[j] - mean))[:OUT]
        kept = [v for j, v in enumerate(q) if j not in out]
    m = len(kept)
    if m < 2:
        return 0.0, []
    mean = sum(kept) / m
    var = sum((v - mean) ** 2 for v in kept) / (m - 1)
    return math.sqrt(float(var)), [float(v) for v in kept]


def main():
    xs = series()
    assert len(xs) == 600
    print("# derive_std_golden.py: x, then std (last 16) of x as float32 bits (hex)")
    print("x,std16")
    for i, x in enumerate(xs):
        w = xs[max(0, i + 1 - LAST):i + 1]
        sd, kept = std_exact(w, len(w) == LAST)
        try:
            import numpy as np
            ref = float(np.std(np.array(kept, dtype=np.float64), ddof=1)) if kept else 0.0
            assert abs(ref - sd) <= 1e-9 * max(abs(ref), 1e-300) or ref == sd, (i, ref, sd)
        except ImportError:
            pass
        print(f"{x!r},{bits(f32(sd)):08x}")


if __name__ == "__main__":
    main()
