# summ.py FILE...: per set/config, each bin's flagged by seed, mean recall and AP
import sys, re, collections
d = collections.defaultdict(dict)
for f in sys.argv[1:]:
    for l in open(f):
        m = re.match(r'(\S+)\s+(\S+)\s+seed (\d+) (\S+)\s+flagged\s+(\d+) prec (\S+) rec (\S+) AP (\S+)', l)
        if m:
            b, s, seed, c, n, p, r, ap = m.groups()
            d[(s, c)].setdefault(b, {})[int(seed)] = (int(n), float(r), float(ap))
for (s, c), bins in d.items():
    line = f'{s:7s} {c:7s}'
    for b, v in bins.items():
        seeds = sorted(v)
        fl = '/'.join(str(v[x][0]) for x in seeds)
        mr = sum(v[x][1] for x in seeds) / len(seeds); ma = sum(v[x][2] for x in seeds) / len(seeds)
        line += f' | {b} {fl} rec {mr:.3f} AP {ma:.3f}'
    print(line)
