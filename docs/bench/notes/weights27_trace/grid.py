import subprocess, json, os, sys
B={'main':('/tmp/weights27/main-outlierd',{}),'top':('/tmp/weights27/w27-outlierd',{'OUTLIERD_WEIGHTS27':'top'}),'knee':('/tmp/weights27/w27-outlierd',{'OUTLIERD_WEIGHTS27':'knee'})}
cfgs=[('mean8','spk'),('mean16','spk'),('mean32','spk'),('mean3','spk'),('pstd','pstd'),('std3','spk')]
seeds=[1,2,3,4,5,7]
out=open(sys.argv[1],'a')
for name in sys.argv[2:]:
    b,e=B[name]; env=dict(os.environ); env.update(e)
    for c,pre in cfgs:
        for s in seeds:
            t=subprocess.run(['nice','-n','10',b,'replay','--input',f'{pre}{s}.csv','--config',f'{c}.yaml','--label-column','label','--json'],capture_output=True,text=True,env=env).stdout
            d=json.loads(t[t.find('{'):t.rfind('}')+1])
            tp=round(d['precision']*d['flagged'])
            r=dict(bin=name,cfg=c,seed=s,flagged=d['flagged'],tp=tp,P=d['precision'],R=d['recall'],AP=d['average_precision'])
            out.write(json.dumps(r)+'\n'); out.flush()
