# limits.py SEEDS RESFILE...: keyroll31b_rule.md stage 1's limits 1-4 per candidate from run.py's res_*.json (and its none comparisons in the .txt)
import json, sys
seeds = [int(s) for s in sys.argv[1].split(',')]
r = {}
for f in sys.argv[2:]:
    r.update(json.load(open(f)))
for b in ['cand1', 'cand2']:
    if f'{b}|clean|{seeds[0]}|std32' not in r: continue
    cl = {c: [r[f'{b}|clean|{s}|{c}']['flagged'] for s in seeds] for c in ('std32', 'mean32')}
    print(f"{b}: limit 1 clean std32 {cl['std32']} mean32 {cl['mean32']} (main {[r[f'main|clean|{s}|std32']['flagged'] for s in seeds]} / {[r[f'main|clean|{s}|mean32']['flagged'] for s in seeds]}): {'holds' if max(cl['std32'] + cl['mean32']) <= 40 else 'FAILS'}")
    for d, c, rr in [('spikes', 'std32', 0.9), ('spikes', 'mean32', 0.9), ('stuck', 'std32', 0.8), ('bursts', 'std32', 0.8), ('stuck', 'mean32', None), ('bursts', 'mean32', None)]:
        m = {x: [sum(r[f'{x}|{d}|{s}|{c}'][k] or 0 for s in seeds) / len(seeds) for k in ('average_precision', 'recall')] for x in ('main', b)}
        ok = '' if rr is None else ('holds' if m[b][0] >= m['main'][0] and m[b][1] >= rr * m['main'][1] else 'FAILS')
        ratio = f"{m[b][1] / m['main'][1]:.2f}x" if m['main'][1] > 0 else 'main 0'
        print(f"   {d} {c}: AP {m['main'][0]:.3f} -> {m[b][0]:.3f}, recall {m['main'][1]:.3f} -> {m[b][1]:.3f} ({ratio}) {ok}")
