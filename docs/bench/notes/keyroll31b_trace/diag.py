# diag.py BIN SEEDS CFGS: a clean fleet's flags by the key's age (its record index) and whether held by flag_clear (score < 5)
import csv, collections, sys
b, seeds, cfgs = sys.argv[1], sys.argv[2].split(','), sys.argv[3].split(',')
for s in seeds:
    keys = [r['key'] for r in csv.DictReader(open(f'clean{s}.csv'))]
    idx, cnt = [], collections.Counter()
    for k in keys:
        idx.append(cnt[k]); cnt[k] += 1
    for c in cfgs:
        rows = [r for r in csv.DictReader(open(f'v_{b}_clean{s}_{c}.csv')) if r['outlier'] == 'true']
        young = [r for r in rows if idx[int(r["row"])] < 232]  # (a key's model from fewer than keys.window records: its first 32 warming + 200)
        held = [r for r in rows if float(r['score']) < 5]
        yk = len({keys[int(r['row'])] for r in rows})
        print(f"{b} clean{s} {c}: {len(rows)} flagged, {len(young)} in a key's first 232 records (young model), {len(held)} held (score < 5), "
              f"{sum(1 for r in rows if idx[int(r['row'])] >= 232 and float(r['score']) >= 5)} full-model scores >= 5; keys flagged {yk}")
