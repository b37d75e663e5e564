#!/bin/bash
# label-free trace: the trace binary's score is the knee's largest lift over the empirical inside a calibration's range
cd /work/wt/tail26b
for S in smap msl asd gecco2018 3w tep daphnet cobotops eds smd8 gecco2017 alfa batadal; do
  echo "$S $(date +%s)" >> /tmp/tail26b/lift/times
  T26B_LIFT=1 nice -n 10 python3 docs/bench/unseen.py --sets $S --binary /tmp/tail26b/trace-outlierd > /dev/null 2> /tmp/tail26b/lift/$S.err
  echo "$S-end $(date +%s)" >> /tmp/tail26b/lift/times
done
echo done >> /tmp/tail26b/lift/times
