#!/usr/bin/env python3
"""A fleet whose sensors come online over time, half of them with a fault under way (docs/BENCHMARKS.md
§12.29): the case of a key's handover from the global model to its own under detect.key_by: key.

    python3 docs/bench/joinfleet.py SEED [SIZE_SD] > join.csv
    outlierd replay --input join.csv --key-column key --key-by key --label-column label --min-records 2000 --json

Five sensors send the first 2,000 rows (the global model); sensor s (5..39) joins at row 2000 + 700 s;
every row is from a sensor drawn uniformly among those online (interleaved); each reading 70 + 2 N(0, 1);
a faulty sensor (each with probability 1/2) reads SIZE_SD (default 10) sd higher from its 20th reading
for 60 readings (label 1), so its fault starts during its warm-up (keys.min_records 30) and lasts past it.
"""
import random
import sys

seed = int(sys.argv[1])
size = float(sys.argv[2]) if len(sys.argv) > 2 else 10
r = random.Random(seed)
sensors = 40
join = {s: 2000 + s * 700 for s in range(sensors)}
faulty = {s for s in range(sensors) if r.random() < 0.5}
count = {s: 0 for s in range(sensors)}
print("key,value,label")
for i in range(40000):
    if i < 2000:
        s = r.choice(range(5))
    else:
        s = r.choice([s for s in range(sensors) if join[s] <= i])
    c = count[s]
    count[s] += 1
    v, label = 70 + 2 * r.gauss(0, 1), 0
    if s in faulty and s >= 5 and 20 <= c < 80:
        v, label = v + size * 2, 1
    print(f"sensor-{s},{v:.5f},{label}")
