for sp in lin log; do for w in none fleet; do
  for s in 1 2 3; do for d in clean stuck bursts spikes; do
    if [ $w = fleet ]; then E="KR28_ROLLING=0,0,32,32"; else E="KR28_X=1"; fi
    r=$(env $E nice ./trace replay --input ${sp}_$d$s.csv --label-column label --min-records 10000 --device cpu --json --config ext.yaml 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print(j['flagged'], j['recall'] or 0, round(j['average_precision'] or 0,3))")
    echo "$sp $w $d$s $r"
  done; done
done; done
