for sc in 0.6 0.8 1 1.3 1.7 2.2; do
  for s in 1 2 3; do for d in clean stuck bursts; do
    r=$(KR28_WSCALE=$sc nice ./trace replay --input $d$s.csv --label-column label --min-records 10000 --device cpu --json --config std32.yaml 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print(j['flagged'], j['recall'] or 0, round(j['average_precision'] or 0,3))")
    echo "scale $sc $d$s $r"
  done; done
done
