# keyroll27_smd_guard.py: docs/BENCHMARKS.md §12.62's SMD guard: replays /tmp/kw27/smd/smd_keyed.csv (the 8 SMD machines interleaved, columns 18, 19, 22; built as keyroll27_rule.md says) under none.yaml / std32.yaml with /tmp/kw27/{main,before,cand1}
import csv, json, subprocess, filecmp
lab = [int(r['label']) for r in csv.DictReader(open('smd_keyed.csv'))]
neg = lab.count(0)
for c in ['none', 'std32']:
    for b in ['main', 'before', 'cand1']:
        v = f'v_{b}_{c}.csv'
        out = subprocess.run([f'/tmp/kw27/{b}', 'replay', '--input', 'smd_keyed.csv', '--label-column', 'label', '--min-records', '10000',
                              '--device', 'cpu', '--json', '--config', f'{c}.yaml', '--verdicts-out', v], capture_output=True, text=True)
        j = json.loads(out.stdout)
        fp = sum(1 for r in csv.DictReader(open(v)) if r['outlier'] == 'true' and lab[int(r['row'])] == 0)
        print(f"{c:6s} {b:7s} flagged {j['flagged']:6d}, label-0 flagged {fp} ({100*fp/neg:.3f} % of {neg}), precision {j['precision']:.3f}, recall {j['recall']:.3f}, AP {j['average_precision']:.3f}, ROC AUC {j['roc_auc']:.3f}", flush=True)
    if c == 'none':
        print('   none verdicts main == defect 1:', filecmp.cmp('v_main_none.csv', 'v_before_none.csv', shallow=False))
