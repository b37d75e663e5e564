# smd_guard.py (keyroll31_smd_guard.py with keyroll31b's switch): keyroll31b_rule.md stage 5: replays smd_keyed.csv (keyroll27_smd_build.py)
# under none / std32 / mean32 with main (/tmp/kr31b/main), cand1 (/tmp/kr31b/cand2 with OUTLIERD_KEYROLL31B=1), cand2 (the same, =2)
import csv, json, subprocess, filecmp, sys, os
lab = [int(r['label']) for r in csv.DictReader(open('smd_keyed.csv'))]
neg = lab.count(0)
bins = [('main', '/tmp/kr31b/main', None), ('cand1', '/tmp/kr31b/cand2', '1'), ('cand2', '/tmp/kr31b/cand2', '2')]
for c in ['none', 'std32', 'mean32']:
    for b, exe, sw in bins:
        env = {k: v for k, v in os.environ.items() if k != 'OUTLIERD_KEYROLL31B'}
        if sw: env['OUTLIERD_KEYROLL31B'] = sw
        v = f'v_{b}_{c}.csv'
        out = subprocess.run([exe, 'replay', '--input', 'smd_keyed.csv', '--label-column', 'label', '--min-records', '10000',
                              '--device', 'cpu', '--json', '--config', f'{c}.yaml', '--verdicts-out', v], capture_output=True, text=True, env=env)
        j = json.loads(out.stdout)
        fp = sum(1 for r in csv.DictReader(open(v)) if r['outlier'] == 'true' and lab[int(r['row'])] == 0)
        print(f"{c:6s} {b:7s} flagged {j['flagged']:6d}, label-0 flagged {fp} ({100*fp/neg:.3f} % of {neg}), precision {j['precision']:.3f}, recall {j['recall']:.3f}, AP {j['average_precision']:.3f}, ROC AUC {j['roc_auc']:.3f}", flush=True)
    if c == 'none':
        for b, _, _ in bins[1:]:
            print(f'   none verdicts main == {b}:', filecmp.cmp('v_main_none.csv', f'v_{b}_none.csv', shallow=False), flush=True)
    for b, _, _ in bins:
        if c != 'none' or b != 'main':
            os.remove(f'v_{b}_{c}.csv')
os.remove('v_main_none.csv')
