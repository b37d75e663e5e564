import sys,json,subprocess,os
# usage: run1.py BIN CONFIG CSV [env k=v...] -> prints flagged P R AP
b,c,f=sys.argv[1:4]
env=dict(os.environ)
for kv in sys.argv[4:]:
    k,v=kv.split('=',1); env[k]=v
t=subprocess.run(['nice','-n','10',b,'replay','--input',f,'--config',c,'--label-column','label','--json'],capture_output=True,text=True,env=env).stdout
i=t.find('{'); d=json.loads(t[i:t.rfind('}')+1])
print(f"{d['flagged']}, {d['precision']:.3f}, {d['recall']:.3f} ({d['average_precision']:.3f})")
