import json,sys,collections
rows=[json.loads(l) for l in open(sys.argv[1])]
by=collections.defaultdict(dict)
for r in rows: by[(r['cfg'],r['seed'])][r['bin']]=r
bins=[b for b in ['main','top','knee'] if any(b in v for v in by.values())]
print('| config | seed | '+' | '.join(bins)+' |')
print('|---|---|'+'---|'*len(bins))
tot={b:[0,0] for b in bins}
for (c,s),v in by.items():
    cells=[]
    for b in bins:
        r=v[b]; cells.append(f"{r['flagged']}, {r['P']:.3f}, {r['R']:.3f} ({r['AP']:.3f})")
        tot[b][0]+=100-r['tp']; tot[b][1]+=r['flagged']-r['tp']
    print(f"| {c} | {s} | "+' | '.join(cells)+' |')
for b in bins: print(b,'missed',tot[b][0],'false flags',tot[b][1])
for b in bins[1:]:
    worse=[(c,s) for (c,s),v in by.items() if v[b]['R']<v['main']['R']]
    print(b,'runs with recall below main:',worse)
