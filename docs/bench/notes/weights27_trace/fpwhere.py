import json,subprocess,os,sys
import numpy as np, pandas as pd
B={'main':('/tmp/weights27/main-outlierd',{}),'decade':('/tmp/weights27/w27b-outlierd',{'OUTLIERD_WEIGHTS27':'decade'}),'knee':('/tmp/weights27/w27-outlierd',{'OUTLIERD_WEIGHTS27':'knee'}),'top':('/tmp/weights27/w27-outlierd',{'OUTLIERD_WEIGHTS27':'top'})}
L={'mean8':8,'mean16':16,'mean32':32,'mean3':60,'pstd':32,'std3':60}
tot={}
for name in sys.argv[1:]:
    b,e=B[name]; env=dict(os.environ); env.update(e)
    agg=np.zeros(4,int)
    for c,pre in [('mean8','spk'),('mean16','spk'),('mean32','spk'),('mean3','spk'),('pstd','pstd'),('std3','spk')]:
        for s in [1,2,3,4,5,7]:
            subprocess.run(['nice','-n','10',b,'replay','--input',f'{pre}{s}.csv','--config',f'{c}.yaml','--label-column','label','--verdicts-out','/tmp/weights27/fpw.csv'],capture_output=True,env=env)
            lab=pd.read_csv(f'{pre}{s}.csv').label.values; sp=np.flatnonzero(lab==1)
            v=pd.read_csv('/tmp/weights27/fpw.csv',keep_default_na=False)
            o=v.outlier.astype(str).str.lower().eq('true').values
            fp=np.flatnonzero(o&(lab==0)); prev=np.searchsorted(sp,fp,side='right')-1
            d=np.where(prev>=0,fp-sp[np.maximum(prev,0)],10**9)
            held=pd.Series(v.reason.values[fp]).str.startswith('held').values if len(fp) else np.zeros(0,bool)
            win=d<L[c]
            agg+=[len(fp),win.sum(),(win&held).sum(),(~win).sum()]
    print(name,'false flags',agg[0],'within the column window after a spike',agg[1],'of them held',agg[2],'elsewhere',agg[3])
