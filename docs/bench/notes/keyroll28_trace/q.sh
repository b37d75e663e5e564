# q.sh BIN CFG SEEDS [ENV...]: flagged/recall/AP per set
b=$1; c=$2; seeds=$3; shift 3
for s in $seeds; do for d in clean stuck bursts spikes; do echo -n "$d$s $c: "; env "$@" nice ./$b replay --input $d$s.csv --label-column label --min-records 10000 --device cpu --json --config $c.yaml 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print(j['flagged'], j['recall'], round(j['average_precision'] or 0,3))"; done; done
