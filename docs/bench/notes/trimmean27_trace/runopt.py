import subprocess, json, sys
# usage: runopt.py NAME BIN OUT.jsonl SUFFIX -- stage 1(a) with configs C+SUFFIX.yaml
name,b,outp,suf=sys.argv[1:5]
out=open(outp,'a')
for c in ['mean8','mean16','mean32','mean3']:
    for s in [1,2,3,4,5,7]:
        t=subprocess.run(['nice','-n','10',b,'replay','--input',f'spk{s}.csv','--config',f'{c}{suf}.yaml','--label-column','label','--json'],capture_output=True,text=True).stdout
        d=json.loads(t[t.find('{'):t.rfind('}')+1])
        r=dict(bin=name,stage='a',cfg=c+suf,seed=s,flagged=d['flagged'],tp=round(d['precision']*d['flagged']),P=d['precision'],R=d['recall'],AP=d['average_precision'])
        out.write(json.dumps(r)+'\n'); out.flush()
