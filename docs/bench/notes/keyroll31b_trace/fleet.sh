# fleet.sh: keyroll31b_rule.md stage 2, OPERATIONS' Backtest fleet (issue 21's), seeds 1-3, 100,000 rows: main, cand1 (/tmp/kr31b/cand2, OUTLIERD_KEYROLL31B=1), cand2 (=2)
for s in 1 2 3; do
  /tmp/kr31b/main gen --kind sensors --keys 200 --sensors 1 --spike-rate 0.002 --spike-min 8 --spike-max 8 --rows 100000 --seed $s > f$s.csv
  cfgs=none; [ $s = 1 ] && cfgs="none std32"
  for c in $cfgs; do for b in main cand1 cand2; do
    case $b in main) exe=/tmp/kr31b/main; sw=;; cand1) exe=/tmp/kr31b/cand2; sw=1;; cand2) exe=/tmp/kr31b/cand2; sw=2;; esac
    env -u OUTLIERD_KEYROLL31B ${sw:+OUTLIERD_KEYROLL31B=$sw} $exe replay --input f$s.csv --key-column key --label-column label --json --device cpu --config fleet_$c.yaml --verdicts-out v_${b}_${s}_$c.csv 2>/dev/null > j.json
    python3 -c "import json; d=json.load(open('j.json')); print('$b seed $s $c flagged', d['flagged'], 'precision %.3f recall %.3f AP %.3f' % (d['precision'], d['recall'], d['average_precision']))"
  done
  for b in cand1 cand2; do cmp -s v_main_${s}_$c.csv v_${b}_${s}_$c.csv && echo "   seed $s $c: verdicts main == $b" || echo "   seed $s $c: verdicts main != $b"; done
  rm -f v_*_${s}_$c.csv; done
  rm -f f$s.csv
done
