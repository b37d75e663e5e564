# run.py SEEDS BINS: keyroll31b_rule.md stage 1 (keyroll31_trace/run.py with a switch): replays gen.sh's data sets under none / std32 / mean32
# with each bin (main: /tmp/kr31b/main; cand1: /tmp/kr31b/cand1 with OUTLIERD_KEYROLL31B=1; unset: /tmp/kr31b/cand1, switch unset),
# printing flagged, precision, recall, AP and ROC AUC, and whether the none verdicts of main and each other bin are identical
import json, subprocess, sys, filecmp, os
seeds = [int(s) for s in sys.argv[1].split(',')]
bins = sys.argv[2].split(',')
sets = sys.argv[3].split(',') if len(sys.argv) > 3 else ['clean', 'spikes', 'stuck', 'bursts']
cfgs = sys.argv[4].split(',') if len(sys.argv) > 4 else ['none', 'std32', 'mean32']
spec = {'main': ('main', None), 'unset': ('cand1', None), 'cand1': ('cand1', '1'), 'cand2': ('cand2', '2'), 'c1on2': ('cand2', '1')}
res = {}
for s in seeds:
    for d in sets:
        for c in cfgs:
            for b in bins:
                exe, sw = spec[b]
                env = {k: v for k, v in os.environ.items() if k != 'OUTLIERD_KEYROLL31B'}
                if sw: env['OUTLIERD_KEYROLL31B'] = sw
                v = f'v_{b}_{d}{s}_{c}.csv'
                out = subprocess.run([f'/tmp/kr31b/{exe}', 'replay', '--input', f'{d}{s}.csv', '--label-column', 'label', '--min-records', '10000',
                                      '--device', 'cpu', '--json', '--config', f'{c}.yaml', '--verdicts-out', v], capture_output=True, text=True, env=env)
                if out.returncode != 0:
                    print(b, d, s, c, out.stderr[-500:]); sys.exit(1)
                j = json.loads(out.stdout)
                res[(b, d, s, c)] = j
                print(f"{b:7s} {d:7s} seed {s} {c:7s} flagged {j['flagged']:5d} prec {j['precision'] or 0:.3f} rec {j['recall'] or 0:.3f} AP {j['average_precision'] or 0:.3f} ROC {j['roc_auc'] or 0:.3f}", flush=True)
            if (c == 'none' or d == 'clean') and 'main' in bins:
                for b in bins:
                    if b != 'main' and (c == 'none' or b == 'unset'):
                        print(f"   {d}{s} {c}: verdicts main == {b}: {filecmp.cmp(f'v_main_{d}{s}_{c}.csv', f'v_{b}_{d}{s}_{c}.csv', shallow=False)}", flush=True)
            if d != 'clean' or c == 'none':  # (disk: only the clean rolling sets' verdicts are kept, for diag.py)
                for b in bins:
                    os.remove(f'v_{b}_{d}{s}_{c}.csv')
json.dump({'|'.join(map(str, k)): v for k, v in res.items()}, open(f'res_{sys.argv[1]}_{sys.argv[2]}.json', 'w'))
