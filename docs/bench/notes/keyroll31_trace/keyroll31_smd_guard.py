# keyroll31_smd_guard.py: keyroll31_rule.md stage 5: replays smd_keyed.csv (keyroll27_smd_build.py) under none / std32 / mean32 with /tmp/kr31/{main,after,after2}
import csv, json, subprocess, filecmp, sys
lab = [int(r['label']) for r in csv.DictReader(open('smd_keyed.csv'))]
neg = lab.count(0)
bins = sys.argv[1].split(',') if len(sys.argv) > 1 else ['main', 'after', 'after2']
for c in ['none', 'std32', 'mean32']:
    for b in bins:
        v = f'v_{b}_{c}.csv'
        out = subprocess.run([f'/tmp/kr31/{b}', 'replay', '--input', 'smd_keyed.csv', '--label-column', 'label', '--min-records', '10000',
                              '--device', 'cpu', '--json', '--config', f'{c}.yaml', '--verdicts-out', v], capture_output=True, text=True)
        j = json.loads(out.stdout)
        fp = sum(1 for r in csv.DictReader(open(v)) if r['outlier'] == 'true' and lab[int(r['row'])] == 0)
        print(f"{c:6s} {b:7s} flagged {j['flagged']:6d}, label-0 flagged {fp} ({100*fp/neg:.3f} % of {neg}), precision {j['precision']:.3f}, recall {j['recall']:.3f}, AP {j['average_precision']:.3f}, ROC AUC {j['roc_auc']:.3f}", flush=True)
    if c == 'none':
        for b in bins[1:]:
            print(f'   none verdicts main == {b}:', filecmp.cmp('v_main_none.csv', f'v_{b}_none.csv', shallow=False), flush=True)
