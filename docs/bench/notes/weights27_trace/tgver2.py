import sys
exec(open('/tmp/weights27/tgcmp.py').read().split('m=load')[0])
def met(name,r):
    if name.startswith('spikes'): return r['R']=='1.000' and float(r['P'])>=0.9 and float(r['AP'])>=0.95
    if name.startswith('clean'): return r['share']<=0.1
    return r['share']<=1.0
m=load('tg_main.txt')
for f in sys.argv[1:]:
    c=load(f)
    lost=[k for k in m if met(k,m[k]) and not met(k,c[k])]
    rl=[k for k in m if m[k]['R']!='n/a' and float(c[k]['R'])<float(m[k]['R'])]
    apl=[k for k in m if m[k]['AP']!='n/a' and float(c[k]['AP'])<float(m[k]['AP'])-0.001]
    inc=max(c[k]['ff']-m[k]['ff'] for k in m); 
    print(f,'targets lost',lost,'recall lower',rl,'AP lower',apl,'false flags',sum(v['ff'] for v in m.values()),'->',sum(v['ff'] for v in c.values()),'largest row increase',inc,[k for k in m if c[k]['ff']-m[k]['ff']==inc])
