"""young30c: main's vs the candidate's scores bit for bit, on probe_targets.py's streams (its
generator, protocols and replay call). The delay fields read nothing (replay logs at Warn, the
candidate's wait at Info: its "young30c" lines were the file paths); the delays are
delay_test.go.txt's, and bitwise.jsonl keeps the scores check only."""
import json, os, re, sys
sys.path.insert(0, "docs/bench")
import numpy as np, pandas as pd
import probe_targets as pt

fams = sys.argv[1].split(",")
variants = [None if v == "clean" else v for v in (sys.argv[2] if len(sys.argv) > 2 else "clean").split(",")]
work = "/tmp/young30c/bw"
os.makedirs(work, exist_ok=True)
for fam in fams:
    n, kind = pt.FAMILIES[fam]
    protos = ["asis", "p5000"] if n <= pt.W else ["asis"]
    for seed in (1, 2, 3):
        for var in variants:
            df, _ = pt.make(fam, seed, var)
            path = f"{work}/{fam}_s{seed}.csv"
            df.to_csv(path, index=False, float_format="%.17g")
            for proto in protos:
                sc, log = {}, []
                for arm, b in (("main", "/tmp/young30c/main/outlierd"), ("y30c", "/tmp/young30c/y30c")):
                    vp = f"{work}/{fam}_s{seed}_{proto}_{arm}.v.csv"
                    extra = (["--timestamp-column", "ts"] if "ts" in df.columns else []) + (["--min-records", "5000"] if proto == "p5000" else [])
                    r = pt.run_replay(b, path, vp, extra)
                    sc[arm] = pd.read_csv(vp, dtype=str)["score"].to_numpy()
                    os.remove(vp)
                    if arm == "y30c":
                        log = [l for l in r.stderr.splitlines() if "young30c" in l]
                wins = [int(m) for l in log for m in re.findall(r'"?window"?[=:]"?(\d+)', l)]
                start, built = (wins[0], wins[-1]) if wins else (0, 0)
                if log and re.search(r'"?waiting"?[=:]true', log[-1]) and "input ended" not in log[-1]:
                    built = pt.W  # the wait ended at the full window (endWait logs nothing)
                print(json.dumps(dict(family=fam, variant=var or "clean", seed=seed, proto=proto, rows=len(df),
                                      wait_from=start, first_model_window=built, delay=built - start,
                                      at_input_end=any("input ended" in l for l in log),
                                      scores_identical=bool(np.array_equal(sc["main"], sc["y30c"])),
                                      log_lines=len(log))), flush=True)
            os.remove(path)
