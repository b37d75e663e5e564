#!/usr/bin/env python3
"""The plain (pre-trimstd26) sample standard deviation of temp over its last 32 readings, as a
CSV column `tstd` after humidity: weights27_rule.md's "plain std" streams.
    python3 plain_std.py spkS.csv > pstdS.csv    # spkS.csv from outlierd gen --kind sensors ...
"""
import csv, math, sys
rows = csv.reader(open(sys.argv[1]))
w = csv.writer(sys.stdout)
h = next(rows)
w.writerow(h[:3] + ["tstd"] + h[3:])
buf = []
for r in rows:
    buf.append(float(r[0]))
    buf = buf[-32:]
    n = len(buf)
    m = sum(buf) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in buf) / (n - 1)) if n > 1 else 0.0
    w.writerow(r[:3] + ["%.6f" % sd] + r[3:])
