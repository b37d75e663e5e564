import subprocess, json, sys
# usage: runall.py NAME BIN OUT.jsonl  -- stage 1(a) and (b) for one binary
name,b,outp=sys.argv[1:4]
out=open(outp,'a')
def rep(f,c,extra=[]):
    t=subprocess.run(['nice','-n','10',b,'replay','--input',f,'--config',c,'--label-column','label','--json']+extra,capture_output=True,text=True).stdout
    return json.loads(t[t.find('{'):t.rfind('}')+1])
for c in ['mean8','mean16','mean32','mean3']:
    for s in [1,2,3,4,5,7]:
        d=rep(f'spk{s}.csv',f'{c}.yaml')
        r=dict(bin=name,stage='a',cfg=c,seed=s,flagged=d['flagged'],tp=round(d['precision']*d['flagged']),P=d['precision'],R=d['recall'],AP=d['average_precision'])
        out.write(json.dumps(r)+'\n'); out.flush()
for z in [3,6]:
    for c in ['mean16','mean32']:
        for s in [1,2,3]:
            d=rep(f'shift{z}_{s}.csv',f'{c}.yaml',['--min-records','2000'])
            r=dict(bin=name,stage='b',cfg=c,z=z,seed=s,flagged=d['flagged'],labelled=d.get('labelled'),tp=round((d['precision'] or 0)*d['flagged']),P=d['precision'],R=d['recall'],AP=d['average_precision'])
            out.write(json.dumps(r)+'\n'); out.flush()
