# events.py SEEDS: after the verdicts (a trace, not a rule's run): stuck and bursts std32, the faults (a key's run of label-1 rows)
# with at least one flag, and the median delay (rows of its key) to the first flag, for main, cand1, cand2
import csv, collections, subprocess, os, sys, statistics
spec = {'main': ('main', None), 'cand1': ('cand1', '1'), 'cand2': ('cand2', '2')}
for s in sys.argv[1].split(','):
    for d in ('stuck', 'bursts'):
        rows = list(csv.DictReader(open(f'{d}{s}.csv')))
        ev, cur = [], {}
        for i, r in enumerate(rows):
            k = r['key']
            if r['label'] == '1':
                if k not in cur: cur[k] = []; ev.append(cur[k])
                cur[k].append(i)
            else:
                cur.pop(k, None)
        for b, (exe, sw) in spec.items():
            env = {k: v for k, v in os.environ.items() if k != 'OUTLIERD_KEYROLL31B'}
            if sw: env['OUTLIERD_KEYROLL31B'] = sw
            subprocess.run([f'/tmp/kr31b/{exe}', 'replay', '--input', f'{d}{s}.csv', '--label-column', 'label', '--min-records', '10000',
                            '--device', 'cpu', '--json', '--config', 'std32.yaml', '--verdicts-out', 'v_ev.csv'], capture_output=True, env=env)
            fl = {int(r['row']) for r in csv.DictReader(open('v_ev.csv')) if r['outlier'] == 'true'}
            hit = [e for e in ev if any(i in fl for i in e)]
            delay = [next(j for j, i in enumerate(e) if i in fl) for e in hit]
            print(f"{d}{s} std32 {b:5s}: faults {len(ev)}, with a flag {len(hit)}, median delay {statistics.median(delay) if delay else '-'} rows of its key, flagged rows in faults {sum(1 for e in ev for i in e if i in fl)}", flush=True)
            os.remove('v_ev.csv')
