#!/usr/bin/env python3
"""Time context (issue 20 item 5): a daily-seasonal sensor stream whose anomalies only the
record's past and time reveal, replayed with and without ingest.derive.

    python3 docs/bench/derive_daily.py OUT_DIR     # writes daily.csv and the three configs

Three sensors (key `sensor`), one reading each every 3 minutes (`ts`, epoch ms; 20,000 rows,
about 14 days), temp = 70 + 10 sin(2 pi time-of-day) + 2 x sensor + N(0, 1). Anomalies
(label 1, 0.5%): half a value normal 12 hours away (inside the global range, wrong for the
hour), half a jump of 6 sd (often inside the daily range). Then, for each config:

    outlierd replay --input OUT_DIR/daily.csv --config OUT_DIR/<plain|derived|derived2>.yaml \\
        --label-column label --device cpu --window 5000 --min-records 2000 \\
        --refresh-records 2500 --json
"""
import math
import os
import random
import sys

CONFIGS = {
    "plain": "",
    "derived": "  derive:\n    features:\n      - {kind: robust_z, of: temp, last: 20}\n      - {kind: time_of_day}\n",
    "derived2": "  derive:\n    features:\n      - {kind: diff, of: temp}\n"
                "      - {kind: robust_z, of: temp, last: 20}\n      - {kind: time_of_day}\n",
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    random.seed(7)
    t0 = 1763856000000  # 2025-11-23 00:00 UTC
    rows = ["sensor,ts,temp,label"]
    for i in range(20000):
        s = i % 3
        ms = t0 + (i // 3) * 180000
        tod = ((ms // 1000) % 86400) / 86400
        base = 70 + 10 * math.sin(2 * math.pi * tod) + 2 * s
        v, label = base + random.gauss(0, 1), 0
        r = random.random()
        if r < 0.0025:
            v, label = 70 - 10 * math.sin(2 * math.pi * tod) + 2 * s + random.gauss(0, 1), 1
        elif r < 0.005:
            v, label = base + random.choice([-6, 6]), 1
        rows.append("s%d,%d,%.3f,%d" % (s, ms, v, label))
    with open(os.path.join(out, "daily.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    for name, derive in CONFIGS.items():
        with open(os.path.join(out, name + ".yaml"), "w") as f:
            f.write("ingest:\n  features: [temp]\n  key_field: sensor\n  event_time_field: ts\n" + derive)


if __name__ == "__main__":
    main()
