import sys, json, collections
outf = sys.argv[1]
rows = collections.defaultdict(list)
for line in open(outf):
    p, o, k, v = line.rstrip('\n').split('\t', 3)
    d = json.loads(v)
    rows[int(p)].append(d)
for p in sorted(rows):
    seen = set(); start = None
    for i, d in enumerate(rows[p]):
        if d['id'] in seen and start is None: start = i
        seen.add(d['id'])
    fl = [1 if (d['scores'] and d['scores']['outlier']) else 0 for d in rows[p]]
    print("partition", p, "outputs", len(fl), "first copy at", start, "overall flag rate %.4f" % (sum(fl)/len(fl)))
    if start:
        for a, b in [(start-2000, start-1000), (start-1000, start), (start, start+500), (start+500, start+1000), (start+1000, start+2000), (start+2000, start+4000)]:
            print("   out rows %d..%d flagged %d" % (a-start, b-start, sum(fl[a:b])))
