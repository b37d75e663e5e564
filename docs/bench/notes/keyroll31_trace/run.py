# run.py SEEDS BINS (keyroll28_run.py with /tmp/kr31/<bin>): replays gen.sh's data sets under none / std32 / mean32 (keyroll31_rule.md stage 1) with each bin (main; after: the branch at 3abb9eb with OUTLIERD_KEYROLL31=1; after2: at 69ead0d with =2), printing flagged, precision, recall, AP and ROC AUC, and whether the none verdicts of main and after are identical
import json, subprocess, sys, filecmp, os
seeds = [int(s) for s in sys.argv[1].split(',')]
bins = sys.argv[2].split(',') if len(sys.argv) > 2 else ['main', 'before', 'after']
sets = ['clean', 'spikes', 'stuck', 'bursts']
cfgs = ['none', 'std32', 'mean32']
res = {}
for s in seeds:
    for d in sets:
        for c in cfgs:
            for b in bins:
                v = f'v_{b}_{d}{s}_{c}.csv'
                out = subprocess.run([f'/tmp/kr31/{b}', 'replay', '--input', f'{d}{s}.csv', '--label-column', 'label', '--min-records', '10000',
                                      '--device', 'cpu', '--json', '--config', f'{c}.yaml', '--verdicts-out', v], capture_output=True, text=True)
                if out.returncode != 0:
                    print(b, d, s, c, out.stderr[-500:]); sys.exit(1)
                j = json.loads(out.stdout)
                res[(b, d, s, c)] = j
                print(f"{b:7s} {d:7s} seed {s} {c:7s} flagged {j['flagged']:5d} prec {j['precision'] or 0:.3f} rec {j['recall'] or 0:.3f} AP {j['average_precision'] or 0:.3f} ROC {j['roc_auc'] or 0:.3f}", flush=True)
            if c == 'none' and 'main' in bins and 'after' in bins:
                same = filecmp.cmp(f'v_main_{d}{s}_none.csv', f'v_after_{d}{s}_none.csv', shallow=False)
                print(f"   none: verdicts main == after: {same}")
json.dump({'|'.join(map(str, k)): v for k, v in res.items()}, open(f'res_{sys.argv[1]}.json', 'w'))
