import sys, os, re, numpy as np, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import unseen
from sklearn.metrics import average_precision_score as APs
from pyod.models.ecod import ECOD
for sid, tr, te, y, segs in unseen.eds(os.path.expanduser("~/.cache/outlierd/unseen10/eds")):
    if not re.match(r"q(1.1|1.2to0|2.0|2.1)", sid): continue
    m = ECOD(); m.fit(tr)
    s = np.array([m.decision_function(te[i:i+1])[0] for i in range(len(te))])
    print(f"{sid}: ECOD fit on probation, each test row scored alone (no test rows in its ECDF): AP {APs(y, s):.3f}")
