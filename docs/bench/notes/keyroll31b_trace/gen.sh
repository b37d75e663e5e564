#!/bin/bash
# keyroll27_gen.sh SEED: docs/bench/notes/keyroll27_rule.md's four data sets of seed SEED (run in a scratch directory; /tmp/kr31b/main: the binary under test)
s=$1; G="/tmp/kr31b/main gen --kind sensors --rows 40000 --head 10000 --keys 50 --sensors 2 --seed $s"
$G --spike-rate 0 > clean$s.csv
$G --spike-rate 0.002 --spike-min 8 --spike-max 8 > spikes$s.csv
$G --spike-rate 0 --stuck 10 --stuck-length 100 --stuck-at 0 > stuck$s.csv
$G --spike-rate 0 --bursts 10 --burst-length 100 > bursts$s.csv
