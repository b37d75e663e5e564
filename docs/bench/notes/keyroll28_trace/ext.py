# ext.py: the rolling std over 32 of each key's value1 and value2 computed outside outlierd (population sd), linear and log (floor 1e-3), rows with fewer than 32 of the key's values dropped
import csv, math, sys, collections
for name in sys.argv[1:]:
    rows = list(csv.DictReader(open(name + '.csv')))
    win = collections.defaultdict(lambda: (collections.deque(), collections.deque()))
    lin = open(f'lin_{name}.csv', 'w'); lg = open(f'log_{name}.csv', 'w')
    for f in (lin, lg): f.write('key,value1,value2,s1,s2,label\n')
    for r in rows:
        a, b = win[r['key']]
        a.append(float(r['value1'])); b.append(float(r['value2']))
        if len(a) > 32: a.popleft(); b.popleft()
        if len(a) < 32: continue
        sd = []
        for q in (a, b):
            m = sum(q) / 32
            sd.append(math.sqrt(sum((x - m) ** 2 for x in q) / 32))
        lin.write(f"{r['key']},{r['value1']},{r['value2']},{sd[0]:.6g},{sd[1]:.6g},{r['label']}\n")
        lg.write(f"{r['key']},{r['value1']},{r['value2']},{math.log(max(sd[0], 1e-3)):.6g},{math.log(max(sd[1], 1e-3)):.6g},{r['label']}\n")
