import sys,re
def load(f):
    out={}
    for l in open(f):
        p=l.rstrip('\n').split('\t')
        if len(p)<7: continue
        fl=int(p[2]); P=p[4].split()[1]; R=p[5].split()[1]; AP=p[6].split()[1]
        tp=round(float(P)*fl) if P!='n/a' else 0
        out[p[0]]=dict(fl=fl,share=float(p[3].split()[0]),P=P,R=R,AP=AP,ff=fl-tp)
    return out
m=load(sys.argv[1])
for f in sys.argv[2:]:
    c=load(f); diff=[k for k in m if (m[k]['fl'],m[k]['R'],m[k]['AP'])!=(c[k]['fl'],c[k]['R'],c[k]['AP'])]
    print(f, 'rows', len(c), 'flags', sum(v['fl'] for v in m.values()), '->', sum(v['fl'] for v in c.values()), 'false', sum(v['ff'] for v in m.values()), '->', sum(v['ff'] for v in c.values()), 'rows differing', len(diff))
    for k in diff: print('   ',k, m[k], '->', c[k])
