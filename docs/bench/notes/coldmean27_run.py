# coldmean27_run.py SEEDS BINS CONFIGS [SETS]: replays keyroll27_gen.sh's data sets (run in their
# directory; docs/BENCHMARKS.md §12.65) with $BINDIR/<bin> (default /tmp/cm27) under each config
# <c>.yaml (none / std32 / mean32: key_by key; nonen / std32n / mean32n: the same under key_by
# none), printing flagged (and, where the reasons say so, how many of them the global model's),
# precision, recall, AP and ROC AUC, and whether each run's verdicts equal the first bin's.
import csv, filecmp, json, os, subprocess, sys
seeds = [int(s) for s in sys.argv[1].split(',')]
bins = sys.argv[2].split(',')
cfgs = sys.argv[3].split(',')
sets = sys.argv[4].split(',') if len(sys.argv) > 4 else ['clean', 'spikes', 'stuck', 'bursts']
bindir = os.environ.get('BINDIR', '/tmp/cm27')
res = {}
for s in seeds:
    for d in sets:
        for c in cfgs:
            for b in bins:
                v = f'v_{b}_{d}{s}_{c}.csv'
                out = subprocess.run([f'{bindir}/{b}', 'replay', '--input', f'{d}{s}.csv', '--label-column', 'label', '--min-records', '10000',
                                      '--device', 'cpu', '--json', '--config', f'{c}.yaml', '--verdicts-out', v], capture_output=True, text=True)
                if out.returncode != 0:
                    print(b, d, s, c, out.stderr[-500:]); sys.exit(1)
                j = json.loads(out.stdout)
                glob = sum(1 for r in csv.DictReader(open(v)) if r['outlier'] == 'true' and 'global model' in r['reason'])
                j['global_flags'] = glob
                same = '' if b == bins[0] else f" same-as-{bins[0]} {filecmp.cmp(f'v_{bins[0]}_{d}{s}_{c}.csv', v, shallow=False)}"
                res['|'.join(map(str, (b, d, s, c)))] = j
                print(f"{b:7s} {d:7s} seed {s} {c:8s} flagged {j['flagged']:5d} (global {glob:5d}) prec {j['precision'] or 0:.3f} rec {j['recall'] or 0:.3f} AP {j['average_precision'] or 0:.3f} ROC {j['roc_auc'] or 0:.3f}{same}", flush=True)
json.dump(res, open(f'res_{sys.argv[1]}_{sys.argv[2]}_{sys.argv[3]}.json', 'w'))
