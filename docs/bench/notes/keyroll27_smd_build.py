# keyroll27_smd_build.py (the bench venv's python: numpy): writes smd_keyed.csv in the current
# directory, docs/BENCHMARKS.md §12.62's SMD guard: the SMD machines of ~/.cache/outlierd/interfusion
# with a test file and its labels as keys, their test rows interleaved round robin, the three
# columns with the most distinct values over those files (18, 19, 22), label = the file's.
import pickle, numpy as np, os
d = os.path.expanduser('~/.cache/outlierd/interfusion')
ms = sorted(m[:-len('_test.pkl')] for m in os.listdir(d) if m.startswith('machine-') and m.endswith('_test.pkl')
            and os.path.exists(os.path.join(d, m[:-len('_test.pkl')] + '_test_label.pkl')))
X = {m: np.asarray(pickle.load(open(f'{d}/{m}_test.pkl', 'rb')), dtype=np.float64) for m in ms}
L = {m: np.asarray(pickle.load(open(f'{d}/{m}_test_label.pkl', 'rb'))).astype(int) for m in ms}
allx = np.vstack([X[m] for m in ms])
distinct = [len(np.unique(allx[:, j])) for j in range(allx.shape[1])]
cols = sorted(range(allx.shape[1]), key=lambda j: (-distinct[j], j))[:3]
print(ms, 'columns', cols)
with open('smd_keyed.csv', 'w') as f:
    f.write('key,f1,f2,f3,label\n')
    for i in range(max(len(X[m]) for m in ms)):
        for m in ms:
            if i < len(X[m]):
                x = X[m][i]
                f.write(f"{m},{x[cols[0]]:.6g},{x[cols[1]]:.6g},{x[cols[2]]:.6g},{L[m][i]}\n")
