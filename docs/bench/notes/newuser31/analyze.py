import sys, json, collections
outf, ends = sys.argv[1], [int(x) for x in sys.argv[2].split(',')]
cnt = collections.Counter(); flagged = {}; recs = collections.defaultdict(list)
for line in open(outf):
    p, o, k, v = line.rstrip('\n').split('\t', 3)
    d = json.loads(v)
    cnt[d['id']] += 1
    recs[d['id']].append(d)
dups = {i: c for i, c in cnt.items() if c > 1}
missing = [f"fleet/{p}/{o}" for p in range(3) for o in range(ends[p]) if f"fleet/{p}/{o}" not in cnt]
print("outputs", sum(cnt.values()), "distinct", len(cnt), "dup ids", len(dups), "missing", len(missing), missing[:10])
# duplicates whose verdicts differ
diff = 0; ex = []
for i in dups:
    vs = recs[i]
    a = [(x['scores'] or {}).get('outlier') if x['scores'] else None for x in vs]
    if len(set(map(str, a))) > 1:
        diff += 1; ex.append((i, [(x['model_version'], x['scores'] and x['scores']['score'], x['explanation'][:80]) for x in vs]))
print("dups with differing verdicts", diff)
for e in ex[:5]: print(e)
fl = [i for i in cnt if any(x['scores'] and x['scores']['outlier'] for x in recs[i])]
print("flagged ids", len(fl))
