# trace.py BINS SEEDS CFGS: as run.py, configs given (traces after the verdict)
import json, subprocess, sys
bins, seeds, cfgs = sys.argv[1].split(','), sys.argv[2].split(','), sys.argv[3].split(',')
for s in seeds:
    for d in ['clean', 'spikes', 'stuck', 'bursts']:
        for c in cfgs:
            for b in bins:
                out = subprocess.run([f'/tmp/kr31/{b}', 'replay', '--input', f'{d}{s}.csv', '--label-column', 'label', '--min-records', '10000',
                                      '--device', 'cpu', '--json', '--config', f'{c}.yaml', '--verdicts-out', f'v_{b}_{d}{s}_{c}.csv'], capture_output=True, text=True)
                if out.returncode != 0:
                    print(b, d, s, c, out.stderr[-500:]); sys.exit(1)
                j = json.loads(out.stdout)
                print(f"{b:7s} {d:7s} seed {s} {c:7s} flagged {j['flagged']:5d} prec {j['precision'] or 0:.3f} rec {j['recall'] or 0:.3f} AP {j['average_precision'] or 0:.3f} ROC {j['roc_auc'] or 0:.3f}", flush=True)
