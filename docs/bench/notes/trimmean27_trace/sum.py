import json,collections
rows=[json.loads(l) for f in ['main.jsonl','cand.jsonl'] for l in open(f)]
by=collections.defaultdict(dict)
for r in rows:
    k=(r['stage'],r['cfg'],r.get('z'),r['seed']); by[k][r['bin']]=r
def cell(r): return f"{r['flagged']}, {r['P'] if r['P'] is None else round(r['P'],3)}, {r['R']:.3f} ({r['AP']:.3f})"
for st in 'ab':
    print(f'stage {st}')
    print('| config | seed | main | cand |'); print('|---|---|---|---|')
    tot={b:[0,0,0] for b in ['main','cand']}
    for k,v in by.items():
        if k[0]!=st: continue
        c=k[1]+(f' z{k[2]}' if k[2] else '')
        print(f"| {c} | {k[3]} | {cell(v['main'])} | {cell(v['cand'])} |")
        for b in tot:
            r=v[b]; lab=100 if st=='a' else None
            tot[b][0]+= (100-r['tp']) if st=='a' else 0
            tot[b][1]+= r['flagged']-r['tp']
    for b in tot: print(b,'missed',tot[b][0],'false flags',tot[b][1])
    worse=[(k, v['main']['R'], v['cand']['R'], v['main']['AP'], v['cand']['AP']) for k,v in by.items() if k[0]==st and (v['cand']['R']<v['main']['R']-(0 if st=='a' else 0.02) or (st=='b' and v['cand']['AP']<v['main']['AP']-0.02))]
    print('runs failing the per-run limit:',worse)
