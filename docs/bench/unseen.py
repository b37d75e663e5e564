#!/usr/bin/env python3
"""An unseen public benchmark: NASA's SMAP and MSL telemetry (and SMD when its data is present), default config.

    nice -n 19 python3 docs/bench/unseen.py                    # SMAP and MSL, every channel
    nice -n 19 python3 docs/bench/unseen.py --sets msl --markdown
    nice -n 19 python3 docs/bench/unseen.py --sets 3w --markdown   # Petrobras 3W, real oil wells
    python3 docs/bench/unseen.py --sets smd --smd ~/.cache/outlierd/smd   # SMD, if you have its files
    nice -n 5 python3 docs/bench/unseen.py --sets smd8,asd --markdown   # 8 of SMD's machines, and ASD
    nice -n 10 python3 docs/bench/unseen.py --sets ucr --markdown      # the UCR anomaly archive (KDD Cup 2021)
    nice -n 10 python3 docs/bench/unseen.py --sets ucr --config docs/bench/timeseries_x0.yaml \
        --peer-derive diff,robust_z:60 --markdown      # a config with derived columns; the peers given the same

    nice -n 10 python3 docs/bench/unseen.py --sets daphnet --markdown  # Daphnet Freezing of Gait (unseen6_protocol.md)
    nice -n 10 python3 docs/bench/unseen.py --sets batadal --markdown  # BATADAL, C-Town's SCADA (unseen7_protocol.md)
    nice -n 10 python3 docs/bench/unseen.py --sets alfa --markdown     # ALFA, real UAV flights (unseen8_protocol.md)
    nice -n 10 python3 docs/bench/unseen.py --sets cobotops --markdown # UR3 CobotOps, a real cobot (unseen9_protocol.md)
    nice -n 10 python3 docs/bench/unseen.py --sets eds --markdown      # EDS, a real distillation plant under attack (unseen10_protocol.md)
    nice -n 10 python3 docs/bench/unseen.py --sets eds --candidate "NAME=BIN:CONFIG" --markdown  # and a second outlierd column

Data, kept outside the repository (like NAB and SKAB):
  SMAP, MSL  Hundman et al., "Detecting spacecraft anomalies using LSTMs and nonparametric dynamic
             thresholding", KDD 2018 (telemanom): 82 channels (SMAP 55 with 25 columns, MSL 27 with
             55 columns: column 0 the telemetry value, the rest one-hot commands), a train and a test
             file each, the test file's anomalous sequences in labeled_anomalies.csv (inclusive row
             ranges). Copied from github.com/imperial-qore/TranAD data/SMAP_MSL (train/*.npy,
             test/*.npy, labeled_anomalies.csv: telemanom's data.zip as published):
                 mkdir -p ~/.cache/outlierd/smap_msl && cd ~/.cache/outlierd/smap_msl
                 # train/<chan>.npy, test/<chan>.npy and labeled_anomalies.csv from that folder
             or --smap-msl DIR / $OUTLIERD_SMAP_MSL.
  SMD        the Server Machine Dataset (OmniAnomaly, github.com/NetManAIOps/OmniAnomaly
             ServerMachineDataset/: train/, test/, test_label/ *.txt), 28 machines, 38 metrics;
             --smd DIR / $OUTLIERD_SMD. (Not run in docs/BENCHMARKS.md §12.20: no copy reachable from
             the development machine had its data files.)

  Daphnet    Daphnet Freezing of Gait (UCI 245, CC BY 4.0; Baechlin et al., IEEE TITB 2010): 9
             accelerometer channels at 64 Hz, N 0/1/2 (outside the experiment / walking / a
             freeze, the anomaly). The 7 recordings of github.com/Dadigno/ML-on-FOG-dataset's
             dataset/ under 4 MiB (comma-separated, a header line), in ~/.cache/outlierd/unseen6/daphnet
             or --daphnet DIR / $OUTLIERD_DAPHNET; protocol and split: docs/bench/notes/unseen6_protocol.md
             and daphnet().
  BATADAL    the BATtle of the Attack Detection ALgorithms (Taormina et al., J. Water Resour. Plann.
             Manage. 144(8), 2018; www.batadal.net): C-Town's SCADA, hourly, 43 readings (tank levels,
             pump and valve flows and states, pressures), **simulated** (epanetCPA), attacks the
             anomaly. dataset03.csv and dataset04.csv (the two training sets) and test_dataset.csv
             (the test set, its ATT_FLAG the published attack windows) of
             github.com/SYChen123/Baseline-outlier-detection-algorithms-on-BATADAL-dataset's data/ at
             f3cc2dcd, in ~/.cache/outlierd/unseen7/batadal or --batadal DIR / $OUTLIERD_BATADAL;
             protocol, split and the competition's scorer: docs/bench/notes/unseen7_protocol.md,
             batadal() and batadal_score().
  ALFA       the AirLab Failure and Anomaly dataset (Keipour, Mousaei and Scherer, IJRR 40(2-3),
             2021): a fixed-wing UAV's real autopilot readings in flight, sudden engine and
             control-surface faults the anomaly, their onset the ground truth. The processed
             flights merged one CSV a flight at 20 Hz (25 readings; field.data the failure status)
             by github.com/FabioCarosi/FaultDetection_ALFA-Dataset's failures/<kind>/ at 50456b9,
             in ~/.cache/outlierd/unseen8/alfa/<kind>/ or --alfa DIR / $OUTLIERD_ALFA; protocol,
             split and ALFA's per-flight detection: docs/bench/notes/unseen8_protocol.md, alfa()
             and alfa_score().
  COBOTOPS   UR3 CobotOps (Tyrovolas, Aliev, Antonelli and Stylios, UCI 963, 2024, CC BY 4.0): a
             UR3 cobot's real joint currents, temperatures and speeds and its gripper's current at
             1 Hz over a day's pick-and-place cycles; its protective stops and grip losses the
             anomaly. The UCI file exported as github.com/SparkyWolf1/
             python_industrial_automation_homeworks' DatasetsTesting/Robot_Data/dataset_02052023.csv
             at 779fce0 (';'-separated, decimal commas), in ~/.cache/outlierd/unseen9/cobotops or
             --cobotops DIR / $OUTLIERD_COBOTOPS; protocol and split (GECCO 2017's halves):
             docs/bench/notes/unseen9_protocol.md and cobotops().
  EDS        an ethanol distillation system's PLC tags under attack (Xue, Pan, Geng, Yang, Liu and
             Deng, IEEE TICPS 2, 2024): a real, scaled-down plant's 46 tags every 0.5 s, each file
             normal operation then one attack (sensor, actuator or set-point tampering, replay,
             MITM, a mode change, a valve opened by hand) to its end, labelled row by row (class).
             The authors' github.com/Margaux2022/Cyber-security-dataset-of-EDS test/*.csv (trial 5
             of each of 41 attacks) at df71e8e (no licence file; the README asks for a citation),
             in ~/.cache/outlierd/unseen10/eds or --eds DIR / $OUTLIERD_EDS; protocol and split:
             docs/bench/notes/unseen10_protocol.md and eds().

  SMD8, ASD  github.com/zhhlee/InterFusion's data/processed/ (Li et al., "Multivariate time series
             anomaly detection and interpretation using hierarchical inter-metric and temporal
             embedding", KDD 2021), as pickled float32 arrays <id>_train.pkl, <id>_test.pkl and
             <id>_test_label.pkl: ASD, the Application Server Dataset, all 12 of its series omi-1 ..
             omi-12 (19 metrics, 5-minute rows); and the 8 of SMD's 28 machines that it holds
             complete (machine-1-6, 1-7, 2-1, 2-2, 2-7, 2-8, 3-3, 3-4; its machine-1-1, 3-6, 3-8
             and 3-11 are over 4 MiB and absent from the snapshot this was copied from):
                 git clone https://github.com/zhhlee/InterFusion
                 cp InterFusion/data/processed/*.pkl ~/.cache/outlierd/interfusion/
             or --interfusion DIR / $OUTLIERD_INTERFUSION. SMD's protocol (§12.20's, as for SMAP/MSL):
             the train part is the probation, the test part is scored. The pickles are read by an
             unpickler that admits numpy arrays only (interfusion()).

  3W         Petrobras's 3W dataset, first version (Vargas et al., "A realistic and public dataset
             with rare undesirable real events in oil wells", J. Petroleum Sci. Eng. 181, 2019):
             one CSV per instance, <class>/<WELL-n_timestamp>.csv, 1-second rows of 8 real
             sensors of an offshore well (timestamp, P-PDG .. QGL, class: 0 normal, 1-8 an event
             in regime, 101-108 its transient, empty unlabelled), as github.com/ricardovvargas/
             3w_dataset's data/ held them at commit a6196f99 (later versions moved them into a
             split 7z and then to Parquet in github.com/petrobras/3W):
                 git clone https://github.com/ricardovvargas/3w_dataset && cd 3w_dataset
                 git archive a6196f99 data | tar -x -C /tmp && cp -r /tmp/data/. ~/.cache/outlierd/3w/
             or --threew DIR / $OUTLIERD_3W. Only real instances (WELL-*) are read, of the classes the
             dataset's own anomaly-detection benchmark uses (1, 2, 5, 6, 7, 8: those with a normal
             period), in class then file-name order; see threew() for its protocol.

  UCR        the UCR Time Series Anomaly Archive (Wu and Keogh, "Current time series anomaly detection
             benchmarks are flawed and are creating the illusion of progress", IEEE TKDE 35(3), 2023;
             the KDD Cup 2021 "Multi-dataset time series anomaly detection" data): 250 univariate series,
             one value a row, NNN_UCR_Anomaly_<name>_<trainEnd>_<begin>_<end>.txt (some files hold
             their values on one line), the first trainEnd rows normal (train), exactly one anomaly
             after them. Copied from github.com/Dhueper/TimeSeries-AnomalyDetection's
             UCR_Anomaly_FullData/ (the archive's folder of that name, as the archive's zip holds it)
             at commit 5c345615; its 16 files of 4 MiB and more are absent from the snapshot this was
             copied from (213-221, 239-242, 244-246), 234 are read:
                 mkdir -p ~/.cache/outlierd/ucr
                 # UCR_Anomaly_FullData/*.txt into it (or the archive's zip, unpacked, the same folder)
             or --ucr DIR / $OUTLIERD_UCR. The archive's labels: rows begin .. end-1 counted from 0
             (TSB-UAD's reading of the file names: its KDD21/001 labels rows 52000-52619 of
             ...sddb40_35000_52000_52620). --ucr-max-rows (default UCR_MAX_ROWS) leaves out the
             longer series, a subset stated by a rule on length fixed before any result (CPU time);
             see score_ucr() for the archive's protocol and scorer.

  GECCO2018  the GECCO Industrial Challenge 2018, "Online anomaly detection for drinking water
             quality" (SPOTSeven lab, TH Koeln, with Thueringer Fernwasserversorgung): one water
             station, 1-minute rows of 9 sensors (Tp, Cl, pH, Redox, Leit, Trueb, Cl_2, Fm, Fm_2) and
             EVENT, the challenge's train and test sets (139,566 rows each). Copied from
             github.com/frehbach/EventDetectR's data/geccoIC2018Train.rda and geccoIC2018Test.rda
             (the organisers' R package, GPL-3; commit 7c4cc4a3) into
             ~/.cache/outlierd/unseen5/gecco2018/, then `python3 docs/bench/gecco2018_convert.py`
             writes the train.csv and test.csv read here; or --gecco2018 DIR / $OUTLIERD_GECCO2018.
             docs/bench/notes/unseen5_protocol.md fixed its protocol before any run; see gecco2018()
             for its missing rows, and the challenge's scorer, the F1 of the flags row by row, is the
             flags' table (docs/BENCHMARKS.md §12.41).
  GECCO2017  the 2017 challenge ("Monitoring of drinking-water quality"; the same station and
             sensors, Feb-May 2016, before every 2018 row): its labelled training data, the
             resource package's waterDataTraining.RDS (copied from github.com/JohnAnih/
             Anomaly-detection-research at f527abe0) into ~/.cache/outlierd/unseen5/gecco2017/,
             then `gecco2018_convert.py --set 2017` writes data.csv; or --gecco2017 DIR /
             $OUTLIERD_GECCO2017. No test file: the protocol's split is its two halves (gecco2017()).

Protocol: each series (channel or machine) separately, in the benchmark's file order; its train
rows then its test rows are one stream, in order; the train rows are the probation P (every
detector may learn from them, none is scored on them: `outlierd replay --min-records P`, capped
at outlierd's window, the most replay takes (UCR: a train part longer than it); the refitted
peers' first fit is on the last W_FIT train rows); only
the test rows are scored. Detectors and their constants are stream_sbs.py's, imported and run
as they are: outlierd with the default config (pipeline.Default(), no --config, no replay
arguments beyond stream_sbs.py's), its combined score ("outlierd") and `scores.recent`
("outlierd recent"), River HalfSpaceTrees, PyOD IForest, ECOD and PCA refitted on a sliding window,
rolling median/MAD z. Nothing here was chosen on these data. With --peer-derive the peers also
run ("<peer>+d") on each column and the columns a --config's ingest.derive adds to it, computed
as outlierd computes them (derive_columns()), so that such a config meets peers given the same.

Scorers, on the test rows:
  AP      point-wise average precision of the score (sklearn's average_precision_score).
  F1      best point-wise F1 over every threshold of the score.
  PA-F1   the literature's protocol for SMD/SMAP/MSL (OmniAnomaly, KDD 2019, and after it most
          papers): best F1 over thresholds after point adjustment (a labelled segment counts as
          wholly detected when any of its rows reaches the threshold). Known to inflate: a random
          score reaches a high PA-F1 on long segments (Kim et al., AAAI 2022), so AP and F1 are
          the stricter figures. Equivalent to best F1 of the score with each labelled row's score
          raised to its segment's maximum, which is how it is computed here.
  3W      (--sets 3w) the dataset's own scorer, row-wise: each detector's verdicts' balanced
          accuracy per instance, mean over the instances (balanced_accuracy()); beside it the
          abnormal rows' precision, recall and F1 pooled, and the score's ROC AUC.
  flags   (every set but TEP and 3W) each detector's verdicts row by row, pooled: rows flagged,
          precision, recall, F1.
  events  telemanom's own scorer on each detector's own flags (its verdicts; no threshold is
          chosen): a labelled sequence is a true positive when a run of flagged rows overlaps it,
          a false negative otherwise; a run of flagged rows that overlaps no labelled sequence is
          a false positive. Counts summed over the channels; precision, recall, F0.5 (the
          paper's figure).
"mean" is the mean over the series of each series' figure; "pooled" is one figure over every
series' test rows concatenated (raw scores, as the literature concatenates; a detector whose
scale differs between series loses there, which is a property of the detector).
Per-series detector outputs are cached under --cache: the peers' keyed by the file contents and
their constants (a peer mended since, stream_sbs.PEER_REVISION, in a file of its own), outlierd's by the file contents, the binary's hash and --config's contents, so
a rerun only scores and another binary or config replays outlierd only.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stream_sbs as sbs  # noqa: E402

SMAP_MSL_DEFAULT = os.path.expanduser("~/.cache/outlierd/smap_msl")
SMD_DEFAULT = os.path.expanduser("~/.cache/outlierd/smd")
TEP_DEFAULT = os.path.expanduser("~/.cache/outlierd/tep")
THREEW_DEFAULT = os.path.expanduser("~/.cache/outlierd/3w")
INTERFUSION_DEFAULT = os.path.expanduser("~/.cache/outlierd/interfusion")
UCR_DEFAULT = os.path.expanduser("~/.cache/outlierd/ucr")
GECCO2018_DEFAULT = os.path.expanduser("~/.cache/outlierd/unseen5/gecco2018")
GECCO2017_DEFAULT = os.path.expanduser("~/.cache/outlierd/unseen5/gecco2017")
DAPHNET_DEFAULT = os.path.expanduser("~/.cache/outlierd/unseen6/daphnet")
BATADAL_DEFAULT = os.path.expanduser("~/.cache/outlierd/unseen7/batadal")
# docs/bench/notes/unseen7_protocol.md, fixed before any run: the competition's split (both
# training sets, in time order, the train part; its test set scored) and its ranking score's
# weight of time-to-detection against the confusion matrix (Taormina et al. 2018).
BATADAL_TRAIN, BATADAL_TEST = ("dataset03.csv", "dataset04.csv"), "test_dataset.csv"
BATADAL_GAMMA = 0.5
# docs/bench/notes/unseen6_protocol.md, fixed before any run: the 9 accelerometer channels, and
# 3W's split (the first 60 % of a recording's experiment rows before its first freeze train).
DAPHNET_CHANNELS = ("A0", "A1", "A2", "U0", "U1", "U2", "T1", "T2", "T3")
DAPHNET_SPLIT = 0.6
ALFA_DEFAULT = os.path.expanduser("~/.cache/outlierd/unseen8/alfa")
# docs/bench/notes/unseen8_protocol.md, fixed before any run: the copy's folders (no_failure/
# holds a byte-identical copy of an engine flight, read once as that), its 20 Hz step, 3W's split
# (the first 60 % of a flight's rows before its fault, or of the flight without one, train) and
# alfa-evaluate's default timeout, reported beside the detection times.
ALFA_KINDS = ("engine", "ailerons", "elevator", "rudder", "no_failure")
ALFA_LABEL, ALFA_TIME = "field.data", "%time"
ALFA_STEP_S, ALFA_SPLIT, ALFA_TIMEOUT_S = 0.05, 0.6, 5.0
COBOTOPS_DEFAULT = os.path.expanduser("~/.cache/outlierd/unseen9/cobotops")
# docs/bench/notes/unseen9_protocol.md, fixed before any run: the 19 readings (Num, Timestamp and
# the cycle counter dropped) and the two faults, either of which labels a row.
COBOTOPS_FILE = "dataset_02052023.csv"
COBOTOPS_READINGS = ("Current_J0", "Temperature_T0", "Current_J1", "Temperature_J1", "Current_J2",
                     "Temperature_J2", "Current_J3", "Temperature_J3", "Current_J4", "Temperature_J4",
                     "Current_J5", "Temperature_J5", "Speed_J0", "Speed_J1", "Speed_J2", "Speed_J3",
                     "Speed_J4", "Speed_J5", "Tool_current")
COBOTOPS_LABELS = ("Robot_ProtectiveStop", "grip_lost")
EDS_DEFAULT = os.path.expanduser("~/.cache/outlierd/unseen10/eds")
# docs/bench/notes/unseen10_protocol.md, fixed before any run: the 46 PLC tags as recorded (time
# and the class label dropped), Attack the anomaly, and 3W's split (the first 60 % of a file's
# rows before its first attack row train).
EDS_TIME, EDS_LABEL, EDS_SPLIT = "time", "class", 0.6
EDS_TAGS = 46
GECCO_SENSORS = ("Tp", "Cl", "pH", "Redox", "Leit", "Trueb", "Cl_2", "Fm", "Fm_2")
# The 234 UCR series read are 6,684 to 250,001 rows (12.8 M in all); every peer on all of
# them is about an hour of CPU on the 2-core development machine, so docs/BENCHMARKS.md §12.33 ran
# the series of at most this many rows (198 of the 234), a rule fixed before any result.
UCR_MAX_ROWS = 100_000
UCR_SLACK = 100  # the archive's scorer: a location within 100 rows of the labelled range is correct
# 3W's own anomaly-detection benchmark (the paper's section 5 and its demo_2 notebook): the
# classes with a normal period, instances with at least 20 minutes of it, its first 60 % for
# training, and the variables that training part shows (NaN share and sd thresholds).
THREEW_CLASSES = (1, 2, 5, 6, 7, 8)
THREEW_MIN_NORMAL, THREEW_SPLIT = 20 * 60, 0.6
THREEW_MAX_NAN, THREEW_MIN_SD = 0.1, 0.01
TEP_ONSET = 160  # a test run's fault starts after 8 simulated hours: row 160 of 960 (3-minute samples)
PEERS = sbs.PEERS
OURS = ("outlierd", "outlierd recent")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="smap,msl", help="smap, msl, smd, smd8, asd, tep, 3w, ucr, gecco2018, gecco2017, daphnet, batadal, alfa, cobotops, eds (comma-separated; default smap,msl)")
    ap.add_argument("--smap-msl", default=os.environ.get("OUTLIERD_SMAP_MSL", SMAP_MSL_DEFAULT))
    ap.add_argument("--smd", default=os.environ.get("OUTLIERD_SMD", SMD_DEFAULT))
    ap.add_argument("--interfusion", default=os.environ.get("OUTLIERD_INTERFUSION", INTERFUSION_DEFAULT),
                    help="InterFusion's data/processed/ (smd8 and asd)")
    ap.add_argument("--tep", default=os.environ.get("OUTLIERD_TEP", TEP_DEFAULT))
    ap.add_argument("--ucr", default=os.environ.get("OUTLIERD_UCR", UCR_DEFAULT), help="the UCR anomaly archive's UCR_Anomaly_FullData/")
    ap.add_argument("--ucr-max-rows", type=int, default=UCR_MAX_ROWS,
                    help=f"UCR: only the series of at most this many rows (0: every series; default {UCR_MAX_ROWS})")
    ap.add_argument("--gecco2018", default=os.environ.get("OUTLIERD_GECCO2018", GECCO2018_DEFAULT),
                    help="the CSVs gecco2018_convert.py writes (train.csv, test.csv)")
    ap.add_argument("--gecco2017", default=os.environ.get("OUTLIERD_GECCO2017", GECCO2017_DEFAULT),
                    help="the CSV gecco2018_convert.py --set 2017 writes (data.csv)")
    ap.add_argument("--daphnet", default=os.environ.get("OUTLIERD_DAPHNET", DAPHNET_DEFAULT),
                    help="Daphnet's recordings SxxRyy.txt (comma-separated, a header line; see unseen6_protocol.md)")
    ap.add_argument("--batadal", default=os.environ.get("OUTLIERD_BATADAL", BATADAL_DEFAULT),
                    help="BATADAL's dataset03.csv, dataset04.csv and test_dataset.csv (see unseen7_protocol.md)")
    ap.add_argument("--check-batadal", action="store_true",
                    help="only check batadal_score() on cases worked by hand and exit")
    ap.add_argument("--alfa", default=os.environ.get("OUTLIERD_ALFA", ALFA_DEFAULT),
                    help="ALFA's flights, one CSV each in <kind>/ folders (see unseen8_protocol.md)")
    ap.add_argument("--check-alfa", action="store_true",
                    help="only check alfa_score() on cases worked by hand and exit")
    ap.add_argument("--cobotops", default=os.environ.get("OUTLIERD_COBOTOPS", COBOTOPS_DEFAULT),
                    help=f"UR3 CobotOps' {COBOTOPS_FILE} (';'-separated, decimal commas; see unseen9_protocol.md)")
    ap.add_argument("--eds", default=os.environ.get("OUTLIERD_EDS", EDS_DEFAULT),
                    help="the EDS set's test/*.csv (unseen10_protocol.md)")
    ap.add_argument("--candidate", default="", metavar="NAME=BIN[:CONFIG]",
                    help="a second outlierd column NAME: binary BIN with config CONFIG (default none) on the same rows, "
                         "its combined score and flags; reported beside, never a peer and never the verdict")
    ap.add_argument("--threew", default=os.environ.get("OUTLIERD_3W", THREEW_DEFAULT), help="3W's data/ (class folders)")
    ap.add_argument("--series", default="", help="only these series (comma-separated ids, e.g. P-1,M-6): a stated subset")
    ap.add_argument("--binary", default="", help="outlierd binary (default: go build ./cmd/outlierd into bin/)")
    ap.add_argument("--config", default="", help="outlierd's config (default: none, pipeline.Default()); "
                    "an option's figures against the same peers (docs/BENCHMARKS.md §12.21)")
    ap.add_argument("--peer-derive", default="", metavar="SPEC",
                    help="also run the peers (as '<peer>+d') on each column and the columns outlierd's ingest.derive "
                         "would add to it, computed as outlierd computes them: SPEC is a comma-separated list of "
                         "diff and robust_z:LAST (e.g. diff,robust_z:60, a --config's derive section over x0); see derive_columns()")
    ap.add_argument("--peer-derive-names", default=",".join(PEERS),
                    help="the peers run with --peer-derive's columns (default every peer): a stated subset, e.g. to leave out IForest's CPU")
    ap.add_argument("--check-derive", action="store_true",
                    help="only check derive_columns() against derive_golden.csv (outlierd's own bits: TestDeriveGolden) and exit")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/outlierd/unseen"))
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    args.derive = parse_derive(args.peer_derive)
    args.derive_names = [d for d in PEERS if d in set(args.peer_derive_names.split(","))] if args.derive else []
    if args.derive and set(args.peer_derive_names.split(",")) - set(PEERS):
        raise SystemExit(f"unseen: --peer-derive-names: unknown peers {sorted(set(args.peer_derive_names.split(',')) - set(PEERS))}")
    return args


# ----------------------------------------------------------------------------- derived columns

# Derived columns for the peers (--peer-derive): outlierd's ingest.derive (stages/ingest/derive.go,
# docs/OPERATIONS.md "Time context") computed the same way to the bit, so that a peer given them
# sees what outlierd's detectors see. A change here that moves any value bumps DERIVE_REVISION, so
# that no cache written before answers for it.
DERIVE_REVISION = 1
DERIVE_SUFFIX = "+d"  # a peer run on the columns and their derived columns
Z_LIMIT = 1e6  # derive.go's zLimit
FLT_MAX = 3.4028234663852886e38


def parse_derive(spec):
    """--peer-derive's SPEC as [("diff", 0, 0), ("robust_z", last, min_values), ...] (robust_z:LAST
    or robust_z:LAST:MIN; min_values defaults to min(last, 10), as derive's does)."""
    ops = []
    for part in filter(None, spec.split(",")):
        f = part.split(":")
        if f[0] == "diff" and len(f) == 1:
            ops.append(("diff", 0, 0))
        elif f[0] == "robust_z" and len(f) in (2, 3) and all(v.isdigit() for v in f[1:]):
            last = int(f[1])
            mn = int(f[2]) if len(f) == 3 else min(last, 10)
            if not 2 <= mn <= last:  # derive's own bounds (deriveconfig.go)
                raise SystemExit(f"unseen: --peer-derive {part}: min_values {mn} is not in [2, last = {last}]")
            ops.append(("robust_z", last, mn))
        else:
            raise SystemExit(f"unseen: --peer-derive: {part!r} is neither diff nor robust_z:LAST[:MIN]")
    return ops


def derive_columns(X, ops):
    """X's columns, then for each column in turn each op's derived column of it (one series: the
    rows in order, train then test, as replay feeds them), as float64 of outlierd's float32 values:
      diff      float32(float64(x) - float64(previous x)), x the float32 outlierd decodes; the first row 0;
      robust_z  (x - median) / scale over the previous `last` values (x excluded), in float64 of
                their float32 values: the median the middle value (even: the two middle ones,
                each halved, summed), scale 1.4826 MAD (MAD the median of |v - median| the same
                way); where that is 0, 1.2533 x their mean absolute deviation (summed in the
                values' sorted order, as derive.go's loop sums); no scale at all: 0 for x equal to
                the median, +-1e6 otherwise; 0 with fewer than min_values previous values;
                clamped to +-1e6, then float32.
    Checked bit for bit against replay's columns (docs/BENCHMARKS.md §12.33)."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    cols = [X[:, j] for j in range(X.shape[1])]
    for j in range(X.shape[1]):
        x32 = X[:, j].astype(np.float32)
        for kind, last, mn in ops:
            if kind == "diff":
                d = np.zeros(len(x32))
                d[1:] = x32[1:].astype(np.float64) - x32[:-1].astype(np.float64)
                cols.append(np.clip(d, -FLT_MAX, FLT_MAX).astype(np.float32).astype(np.float64))
                continue
            z = np.zeros(len(x32), dtype=np.float32)
            for i in range(mn, min(last, len(x32))):  # the history still filling: one row at a time
                z[i] = robust_z(np.sort(x32[:i])[None, :], x32[i:i + 1])[0]
            if len(x32) > last:
                win = sliding_window_view(x32, last)  # row i's history: win[i - last] = x32[i-last : i]
                for c0 in range(last, len(x32), 8192):  # chunks bound the sorted copies' memory
                    c1 = min(len(x32), c0 + 8192)
                    z[c0:c1] = robust_z(np.sort(win[c0 - last:c1 - last], axis=1), x32[c0:c1])
            cols.append(z.astype(np.float64))
    return np.column_stack(cols)


DERIVE_GOLDEN = os.path.join(HERE, "derive_golden.csv")


def derive_golden():
    """The text of derive_golden.csv: a fixed series that walks every branch of diff and
    robust_z:60 (the filling history, ordinary rows, ties where MAD is 0 and the mean absolute
    deviation is not, a constant stretch: no spread, then +-1e6, a spike, values that float32
    rounds) with derive_columns()' values as float32 bits. stages/ingest's TestDeriveGolden
    runs outlierd's Deriver over the same x and wants the same bits; `unseen.py --check-derive`
    wants this text: together they keep --peer-derive equal to outlierd's derivation."""
    import numpy as np

    i = np.arange(600)
    x = np.round(10 * np.sin(0.37 * i) + 3 * np.sin(1.91 * i), 1)
    x[150:260] = np.where(i[150:260] % 7 == 0, x[150:260], 2.5)  # most equal: MAD 0, mean |dev| > 0
    x[300:380] = 4.0  # no spread at all
    x[380] = 3.5  # -1e6
    x[420] = 250.0  # a spike
    x[430:495] = 7.0
    x[495] = 7.5  # +1e6
    x[500:] = x[500:] + 0.123456789  # digits float32 rounds
    d = derive_columns(x[:, None], [("diff", 0, 0), ("robust_z", 60, 10)])
    bits = d[:, 1:].astype(np.float32).view(np.uint32)
    lines = ["# unseen.py derive_golden(): x, then diff and robust_z:60 of x as float32 bits (hex)", "x,diff,rz60"]
    lines += [f"{repr(float(v))},{b[0]:08x},{b[1]:08x}" for v, b in zip(x, bits)]
    return "\n".join(lines) + "\n"


def robust_z(sorted32, x32):
    """derive.go's robustZ for rows of sorted float32 histories (n values each) and their float32
    current values: float32 z per row."""
    import numpy as np

    v = sorted32.astype(np.float64)
    n = v.shape[1]

    def middle(a):  # derive.go: a[n/2], or a[n/2-1]/2 + a[n/2]/2
        return a[:, n // 2] if n % 2 else a[:, n // 2 - 1] / 2 + a[:, n // 2] / 2

    med = middle(v)
    dev = np.abs(v - med[:, None])  # |v - med| is med - v below it exactly (IEEE negation)
    scale = 1.4826 * middle(np.sort(dev, axis=1))
    zero = scale == 0
    if zero.any():  # cumsum: left to right in the sorted order, derive.go's loop; np.sum pairs
        scale[zero] = 1.2533 * np.cumsum(dev[zero], axis=1)[:, -1] / n
    x = x32.astype(np.float64)
    ok = (scale > 0) & np.isfinite(scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(ok, (x - med) / np.where(ok, scale, 1.0), np.sign(x - med) * Z_LIMIT)
    return np.clip(z, -Z_LIMIT, Z_LIMIT).astype(np.float32)


# ----------------------------------------------------------------------------- data


def smap_msl(root, spacecraft):
    """(id, train, test, y, segments) per channel of spacecraft, in labeled_anomalies.csv's order."""
    import numpy as np
    import pandas as pd

    lab_path = os.path.join(root, "labeled_anomalies.csv")
    if not os.path.exists(lab_path):
        raise SystemExit(f"unseen: {lab_path} not found (see this script's docstring for the data)")
    lab = pd.read_csv(lab_path)
    for _, r in lab[lab["spacecraft"] == spacecraft].iterrows():
        train = np.load(os.path.join(root, "train", f"{r.chan_id}.npy")).astype(np.float64)
        test = np.load(os.path.join(root, "test", f"{r.chan_id}.npy")).astype(np.float64)
        segs = [tuple(s) for s in json.loads(r.anomaly_sequences)]
        y = np.zeros(len(test), dtype=int)
        for a, b in segs:  # telemanom's ranges are inclusive
            if not 0 <= a <= b < len(test):
                raise SystemExit(f"unseen: {lab_path}: {r.chan_id}: sequence [{a}, {b}] outside its {len(test)} test rows")
            y[a:b + 1] = 1
        yield r.chan_id, train, test, y, sorted(segs)


def smd(root):
    """(id, train, test, y, segments) per machine, machine-1-1 .. machine-3-11 in numeric order."""
    import numpy as np

    tdir = os.path.join(root, "train")
    if not os.path.isdir(tdir):
        raise SystemExit(f"unseen: {tdir} not found (SMD: see this script's docstring)")
    names = sorted((f[:-4] for f in os.listdir(tdir) if f.endswith(".txt")),
                   key=lambda m: tuple(int(p) for p in m.split("-")[1:]))
    for m in names:
        train = np.loadtxt(os.path.join(root, "train", m + ".txt"), delimiter=",", ndmin=2)
        test = np.loadtxt(os.path.join(root, "test", m + ".txt"), delimiter=",", ndmin=2)
        y = np.loadtxt(os.path.join(root, "test_label", m + ".txt"), delimiter=",").astype(int)
        if len(y) != len(test):
            raise SystemExit(f"unseen: {root}/test_label/{m}.txt: {len(y)} labels for {len(test)} test rows")
        yield m, train, test, y, runs(y.astype(bool))


def interfusion(root, prefix):
    """(id, train, test, y, segments) per series of InterFusion's data/processed/ whose name starts
    with prefix ("machine-": SMD, "omi-": ASD), in numeric order. Only numpy arrays are unpickled:
    a pickle naming any other global is refused rather than run."""
    import pickle

    import numpy as np

    allowed = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype")}

    class Arrays(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) not in allowed:
                raise pickle.UnpicklingError(f"unseen: {module}.{name} is not a numpy array's part")
            return super().find_class(module, name)

    def load(path):
        with open(path, "rb") as fh:
            a = Arrays(fh).load()
        if not isinstance(a, np.ndarray):
            raise SystemExit(f"unseen: {path}: not an array")
        return a.astype(np.float64)

    if not os.path.isdir(root):
        raise SystemExit(f"unseen: {root} not found (SMD8, ASD: see this script's docstring)")
    suffix = "_test_label.pkl"
    files = set(os.listdir(root))
    # a series is read when all three of its files are there (the snapshot lacks four machines'
    # data but has their labels: those are named on stderr, not read)
    names = sorted((f[:-len(suffix)] for f in files if f.startswith(prefix) and f.endswith(suffix)),
                   key=lambda m: tuple(int(p) for p in m[len(prefix):].split("-")))
    absent = [m for m in names if not {m + "_train.pkl", m + "_test.pkl"} <= files]
    if absent:
        print(f"# {prefix}: no data files for {', '.join(absent)}: not read", file=sys.stderr)
    names = [m for m in names if m not in absent]
    if not names:
        raise SystemExit(f"unseen: no {prefix}* series in {root}")
    for m in names:
        train = load(os.path.join(root, m + "_train.pkl"))
        test = load(os.path.join(root, m + "_test.pkl"))
        y = load(os.path.join(root, m + suffix)).reshape(-1)
        if train.ndim != 2 or test.ndim != 2 or train.shape[1] != test.shape[1] or len(y) != len(test):
            raise SystemExit(f"unseen: {root}/{m}: train {train.shape}, test {test.shape}, {len(y)} labels")
        if not set(np.unique(y)) <= {0.0, 1.0}:
            raise SystemExit(f"unseen: {root}/{m}{suffix}: labels other than 0 and 1")
        y = y.astype(int)
        yield m, train, test, y, runs(y.astype(bool))


def tep(root):
    """(id, train, test, y, segments) per run: d00_te (normal operation, no fault: y all 0), then
    faults 1-21's test runs d01_te .. d21_te, each after d00.dat (500 normal rows, stored
    transposed: 52 x 500) as its train rows; a fault's rows are TEP_ONSET .. 959."""
    import numpy as np

    path = os.path.join(root, "d00.dat")
    if not os.path.exists(path):
        raise SystemExit(f"unseen: {path} not found (TEP: see this script's docstring)")
    train = np.loadtxt(path).T
    for i in range(22):
        test = np.loadtxt(os.path.join(root, f"d{i:02d}_te.dat"), ndmin=2)
        if test.shape != (960, train.shape[1]):
            raise SystemExit(f"unseen: {root}/d{i:02d}_te.dat: {test.shape}, want (960, {train.shape[1]})")
        y = np.zeros(len(test), dtype=int)
        if i > 0:
            y[TEP_ONSET:] = 1
        yield f"d{i:02d}", train, test, y, runs(y.astype(bool))


def threew(root, skipped=None):
    """(id, train, test, y, segments) per real 3W instance, by 3W's anomaly-detection benchmark:
    its normal period (the rows before the first that is not labelled 0) must be at least
    THREEW_MIN_NORMAL rows, and its first THREEW_SPLIT are the train rows (the probation); the
    test rows are the rest of it and the event, whose transient and in-regime rows are both
    abnormal (3W's grouping), as are the few unlabelled rows at the event's edges (the class
    column empty; inside the event, not normal operation). Variables are kept as 3W's benchmark
    keeps them: at most THREEW_MAX_NAN of their train rows missing and their sd over
    THREEW_MIN_SD there; a kept variable's remaining gaps carry its last value forward (the first
    one backward), where 3W's notebook writes 0 for its feature extractor. An instance too short
    or without a variable is appended to skipped as (id, why)."""
    import numpy as np
    import pandas as pd

    if not os.path.isdir(root):
        raise SystemExit(f"unseen: {root} not found (3W: see this script's docstring)")
    for c in THREEW_CLASSES:
        d = os.path.join(root, str(c))
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not (f.startswith("WELL-") and f.endswith(".csv")):
                continue
            df = pd.read_csv(os.path.join(d, f))
            sid = f"{c}_{f[:-4]}"  # a file name in the cache: no slash
            cls = df["class"].to_numpy(dtype=np.float64)
            abnormal = ~(cls == 0)  # NaN: not normal
            n_normal = int(np.argmax(abnormal)) if abnormal.any() else len(cls)
            if n_normal < THREEW_MIN_NORMAL or n_normal == len(cls):
                if skipped is not None:
                    skipped.append((sid, f"{n_normal} normal rows of {len(cls)}"))
                continue
            p = int(THREEW_SPLIT * n_normal)
            X = df.drop(columns=["timestamp", "class"]).astype(np.float64)
            tr = X.iloc[:p]
            keep = [v for v in X.columns if tr[v].isna().mean() <= THREEW_MAX_NAN and tr[v].std() > THREEW_MIN_SD]
            if not keep:  # 3W's notebook has no feature left to score such an instance with either
                if skipped is not None:
                    skipped.append((sid, f"no variable passes the NaN and sd rules on its {p} train rows"))
                continue
            X = X[keep].ffill().bfill().to_numpy()
            y = abnormal[p:].astype(int)
            yield sid, X[:p], X[p:], y, runs(y.astype(bool))


def ucr(root, max_rows=0, skipped=None):
    """(id, train, test, y, segments) per series of the UCR anomaly archive, in file-number order:
    NNN_UCR_Anomaly_<name>_<trainEnd>_<begin>_<end>.txt, the first trainEnd rows the train part,
    the labelled anomaly rows begin .. end-1 (from 0; see the docstring). A series of more than
    max_rows rows (max_rows > 0) is appended to skipped as (id, rows) and not read further."""
    import numpy as np

    if not os.path.isdir(root):
        raise SystemExit(f"unseen: {root} not found (UCR: see this script's docstring)")
    pat = re.compile(r"^(\d{3})_UCR_Anomaly_(.+)_(\d+)_(\d+)_(\d+)\.txt$")
    files = sorted(f for f in os.listdir(root) if pat.match(f))
    if not files:
        raise SystemExit(f"unseen: no NNN_UCR_Anomaly_*.txt in {root}")
    for f in files:
        num, name, tr, a, b = pat.match(f).groups()
        tr, a, b = int(tr), int(a), int(b)
        sid = f"{num}_{name}"
        with open(os.path.join(root, f)) as fh:
            x = np.array(fh.read().split(), dtype=np.float64)  # a value a line, or all on one
        if max_rows and len(x) > max_rows:
            if skipped is not None:
                skipped.append((sid, f"{len(x)} rows"))
            continue
        if not 0 < tr <= a < b <= len(x):
            raise SystemExit(f"unseen: {f}: train end {tr}, anomaly [{a}, {b}) outside its {len(x)} rows")
        y = np.zeros(len(x) - tr, dtype=int)
        y[a - tr:b - tr] = 1
        yield sid, x[:tr, None], x[tr:, None], y, [(a - tr, b - 1 - tr)]


def gecco_rows(path):
    """(sensors, EVENT) of one GECCO water-quality CSV by unseen5_protocol.md's rule, fixed before
    any run: a row whose sensors are all missing is no record (a station that reports nothing
    sends nothing) and is left out of the stream and of the scored rows (none is labelled; the
    challenges' F1 counts no true negatives); a missing cell in a row that has others carries its
    column's last value forward (3W's rule here)."""
    import numpy as np
    import pandas as pd

    if not os.path.exists(path):
        raise SystemExit(f"unseen: {path} not found (GECCO: see this script's docstring)")
    df = pd.read_csv(path)
    X = df[list(GECCO_SENSORS)]
    gone = X.isna().all(axis=1).to_numpy()
    if df["EVENT"].to_numpy()[gone].any():
        raise SystemExit(f"unseen: {path}: a labelled row without any sensor value (the protocol assumes none)")
    X = X[~gone].ffill()
    if X.isna().any().any():
        raise SystemExit(f"unseen: {path}: a column missing from its first row on")
    print(f"# {path}: {int(gone.sum())} rows without any sensor value left out of {len(df)}", file=sys.stderr)
    return X.to_numpy(dtype=np.float64), df["EVENT"].to_numpy()[~gone].astype(int)


def gecco2018(root):
    """(id, train, test, y, segments) of the GECCO 2018 challenge's one station: its train set as
    the train rows, its test set as the test rows, EVENT the label (gecco_rows())."""
    train, _ = gecco_rows(os.path.join(root, "train.csv"))
    test, y = gecco_rows(os.path.join(root, "test.csv"))
    yield "gecco2018", train, test, y, runs(y.astype(bool))


def gecco2017(root):
    """(id, train, test, y, segments) of the GECCO 2017 challenge's labelled training data (the
    same station, Feb-May 2016; its test file is not public here): unseen5_protocol.md's split,
    fixed before any run, the first half of the rows in time order the train rows, the second
    half the test rows (halves of the file's rows, before gecco_rows() leaves the empty ones
    out of each)."""
    import pandas as pd

    path = os.path.join(root, "data.csv")
    if not os.path.exists(path):
        raise SystemExit(f"unseen: {path} not found (GECCO2017: see this script's docstring)")
    df = pd.read_csv(path)
    half = len(df) // 2
    with tempfile.TemporaryDirectory() as td:
        parts = []
        for name, rows in (("train", df.iloc[:half]), ("test", df.iloc[half:])):
            rows.to_csv(os.path.join(td, f"{name}.csv"), index=False)
            parts.append(gecco_rows(os.path.join(td, f"{name}.csv")))
    (train, _), (test, y) = parts
    yield "gecco2017", train, test, y, runs(y.astype(bool))


def daphnet(root, skipped=None):
    """(id, train, test, y, segments) per Daphnet Freezing of Gait recording, by
    docs/bench/notes/unseen6_protocol.md (fixed before any run): rows annotated 0 (not part of the
    experiment) are no records; 2 (a freeze) is abnormal, 1 normal; the first DAPHNET_SPLIT of the
    experiment rows before the first freeze are the train rows, the rest the test rows. A
    recording without a freeze has nothing to score and is appended to skipped as (id, why)."""
    import numpy as np
    import pandas as pd

    if not os.path.isdir(root):
        raise SystemExit(f"unseen: {root} not found (Daphnet: see unseen6_protocol.md)")
    files = sorted(f for f in os.listdir(root) if re.match(r"^S\d\dR\d\d\.txt$", f))
    if not files:
        raise SystemExit(f"unseen: no SxxRyy.txt in {root}")
    for f in files:
        df = pd.read_csv(os.path.join(root, f))
        sid = f[:-4]
        df = df[df["N"] != 0]
        freeze = (df["N"] == 2).to_numpy()
        if not freeze.any():
            if skipped is not None:
                skipped.append((sid, f"no freeze in {len(df)} experiment rows"))
            continue
        X = df[list(DAPHNET_CHANNELS)].to_numpy(dtype=np.float64)
        p = int(DAPHNET_SPLIT * int(np.argmax(freeze)))
        y = freeze[p:].astype(int)
        yield sid, X[:p], X[p:], y, runs(y.astype(bool))


def batadal(root):
    """(id, train, test, y, segments) of BATADAL by docs/bench/notes/unseen7_protocol.md (fixed
    before any run): training sets 1 and 2 in that (time) order the train rows, the test set the
    test rows, its ATT_FLAG the label; the 43 readings as the files give them (DATETIME and
    ATT_FLAG dropped; the files pad some column names with a space). No training label is read."""
    import numpy as np
    import pandas as pd

    frames = []
    for f in BATADAL_TRAIN + (BATADAL_TEST,):
        path = os.path.join(root, f)
        if not os.path.exists(path):
            raise SystemExit(f"unseen: {path} not found (BATADAL: see unseen7_protocol.md)")
        df = pd.read_csv(path)
        df.columns = [c.strip() for c in df.columns]
        frames.append(df)
    cols = [c for c in frames[0].columns if c not in ("DATETIME", "ATT_FLAG")]
    for f, df in zip(BATADAL_TRAIN + (BATADAL_TEST,), frames):
        if [c for c in df.columns if c not in ("DATETIME", "ATT_FLAG")] != cols:
            raise SystemExit(f"unseen: {f}: columns differ from {BATADAL_TRAIN[0]}'s")
        if df[cols].isna().any().any():
            raise SystemExit(f"unseen: {f}: a missing cell (the protocol assumes none)")
    train = np.vstack([df[cols].to_numpy(dtype=np.float64) for df in frames[:-1]])
    flag = frames[-1]["ATT_FLAG"].to_numpy()
    if not np.isin(flag, (0, 1)).all():
        raise SystemExit(f"unseen: {BATADAL_TEST}: ATT_FLAG other than 0 and 1")
    y = flag.astype(int)
    yield "batadal", train, frames[-1][cols].to_numpy(dtype=np.float64), y, runs(y.astype(bool))


def batadal_score(flags, segs, y, gamma=BATADAL_GAMMA):
    """BATADAL's ranking score of one detector's verdicts (Taormina et al. 2018):
    S = gamma*S_TTD + (1-gamma)*S_CM, S_TTD = 1 - mean over the attacks of TTD/dt, dt an attack's
    duration in hours (its rows - 1), TTD the hours from its first row to the first flagged row
    among its rows (dt when none is flagged); S_CM = (TPR + TNR)/2 row by row. Returns
    (S, S_TTD, S_CM, attacks detected)."""
    import numpy as np

    f = np.asarray(flags, dtype=bool)
    ratios, found = [], 0
    for a, b in segs:
        hit = np.flatnonzero(f[a:b + 1])
        dt = b - a
        if hit.size:
            found += 1
            ratios.append(hit[0] / dt if dt else 0.0)  # a one-row attack flagged: no delay
        else:
            ratios.append(1.0)
    s_ttd = 1.0 - float(np.mean(ratios))
    s_cm = balanced_accuracy(y, f)
    return gamma * s_ttd + (1 - gamma) * s_cm, s_ttd, s_cm, found


def check_batadal():
    """batadal_score() against cases worked by hand (the run's only check of its scorer)."""
    import numpy as np

    y = np.zeros(20, dtype=int)
    y[2:7] = 1  # attack 1: rows 2..6, dt 4
    y[10:13] = 1  # attack 2: rows 10..12, dt 2
    segs = runs(y.astype(bool))
    cases = []
    none = np.zeros(20, dtype=bool)
    cases.append(("nothing flagged", none, (0.25, 0.0, 0.5, 0)))
    cases.append(("every row flagged", ~none, (0.75, 1.0, 0.5, 2)))
    f = none.copy()
    f[[4, 12, 15]] = True  # attack 1 at TTD 2 (2/4), attack 2 at its last row (2/2 = undetected's 1), one false alarm
    # S_TTD = 1 - (0.5 + 1)/2 = 0.25; TPR 2/8, TNR 11/12; S_CM = (0.25 + 11/12)/2 = 0.583333...
    cases.append(("hand case", f, (0.5 * 0.25 + 0.5 * (0.25 + 11 / 12) / 2, 0.25, (0.25 + 11 / 12) / 2, 2)))
    bad = []
    for name, flags, want in cases:
        got = batadal_score(flags, segs, y)
        if got[3] != want[3] or not np.allclose(got[:3], want[:3], rtol=0, atol=1e-12):
            bad.append(f"{name}: got {got}, want {want}")
    if bad:
        raise SystemExit("unseen: batadal_score(): " + "; ".join(bad))
    print(f"batadal_score() equals {len(cases)} cases worked by hand")


def alfa(root, skipped=None):
    """(id, train, test, y, segments) per ALFA flight by docs/bench/notes/unseen8_protocol.md
    (fixed before any run): the 25 readings of the copy (ALFA_TIME and ALFA_LABEL dropped; read
    by name: one file repeats them with suffixes); a file's leading rows that miss a reading are
    no records, a later missing cell carries the column's last value forward; a fault flight's
    rows are faulty from the first non-zero label to its end; the first ALFA_SPLIT of the rows
    before the fault (of every row without one) train. A no-fault flight yields y all 0 and no
    segment (ALFA's scorer counts it). A file byte-identical to one read already is appended to
    skipped as (id, why)."""
    import numpy as np
    import pandas as pd

    if not os.path.isdir(root):
        raise SystemExit(f"unseen: {root} not found (ALFA: see unseen8_protocol.md)")
    cols, seen = None, {}
    for kind in ALFA_KINDS:
        d = os.path.join(root, kind)
        files = sorted(f for f in os.listdir(d) if f.startswith("carbonZ_") and f.endswith(".csv")) if os.path.isdir(d) else []
        if not files:
            raise SystemExit(f"unseen: no carbonZ_*.csv in {d}")
        for f in files:
            path, sid = os.path.join(d, f), f[len("carbonZ_"):-len(".csv")]
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            if digest in seen:
                if skipped is not None:
                    skipped.append((f"{kind}/{sid}", f"byte-identical to {seen[digest]}"))
                continue
            seen[digest] = f"{kind}/{sid}"
            df = pd.read_csv(path)
            if cols is None:  # the first file, an engine flight's: its columns name the readings
                cols = [c for c in df.columns if c not in (ALFA_TIME, ALFA_LABEL)]
            if [c for c in cols if c not in df.columns]:
                raise SystemExit(f"unseen: {path}: lacks readings {[c for c in cols if c not in df.columns]}")
            step = pd.to_datetime(df[ALFA_TIME]).diff().dt.total_seconds().to_numpy()[1:]
            if not np.allclose(step, ALFA_STEP_S, rtol=0, atol=1e-3):
                raise SystemExit(f"unseen: {path}: a step other than {ALFA_STEP_S} s")
            have = df[cols].notna().all(axis=1).to_numpy()
            if not have.any():
                raise SystemExit(f"unseen: {path}: no row with every reading")
            df = df.iloc[int(np.argmax(have)):]
            X = df[cols].ffill().to_numpy(dtype=np.float64)
            if ALFA_LABEL in df.columns:
                fault = (df[ALFA_LABEL].to_numpy() != 0)
                if not fault.any():
                    raise SystemExit(f"unseen: {path}: a label column without a fault")
                onset = int(np.argmax(fault))
                p = int(ALFA_SPLIT * onset)
                y = np.zeros(len(X) - p, dtype=int)
                y[onset - p:] = 1
            else:
                if kind != "no_failure":
                    raise SystemExit(f"unseen: {path}: no {ALFA_LABEL} outside no_failure/")
                p = int(ALFA_SPLIT * len(X))
                y = np.zeros(len(X) - p, dtype=int)
            yield sid, X[:p], X[p:], y, runs(y.astype(bool))


def cobotops(root):
    """(id, train, test, y, segments) of UR3 CobotOps by docs/bench/notes/unseen9_protocol.md (fixed
    before any run): a row that misses any of COBOTOPS_READINGS or the protective-stop flag is no
    record (46 empty rows and 8 that hold Current_J0 = 1 alone, none labelled) and is left out; a
    row is abnormal when either of COBOTOPS_LABELS is true; GECCO 2017's split, the first half of
    the rows (in the file's, i.e. time, order) the train rows, the second half the test rows."""
    import numpy as np
    import pandas as pd

    path = os.path.join(root, COBOTOPS_FILE)
    if not os.path.exists(path):
        raise SystemExit(f"unseen: {path} not found (CobotOps: see unseen9_protocol.md)")
    df = pd.read_csv(path, sep=";", decimal=",")
    df.columns = [c.strip() for c in df.columns]  # the file pads "cycle " with a space
    lacking = [c for c in COBOTOPS_READINGS + COBOTOPS_LABELS if c not in df.columns]
    if lacking:
        raise SystemExit(f"unseen: {path}: lacks columns {lacking}")
    gone = df[list(COBOTOPS_READINGS) + [COBOTOPS_LABELS[0]]].isna().any(axis=1).to_numpy()
    labels = df[list(COBOTOPS_LABELS)]
    if labels[~gone].isna().any().any():
        raise SystemExit(f"unseen: {path}: a label missing in a row with every reading")
    marks = [set(labels[c][~gone].map(str)) for c in COBOTOPS_LABELS]
    if any(m - {"True", "False"} for m in marks):
        raise SystemExit(f"unseen: {path}: a label other than True and False: {marks}")
    if (labels[gone] == True).any().any():  # noqa: E712 (the cells are True, False or NaN)
        raise SystemExit(f"unseen: {path}: a labelled row without its readings (the protocol assumes none)")
    print(f"# {path}: {int(gone.sum())} rows missing readings left out of {len(df)}", file=sys.stderr)
    df = df[~gone]
    X = df[list(COBOTOPS_READINGS)].to_numpy(dtype=np.float64)
    abnormal = np.zeros(len(df), dtype=bool)
    for c in COBOTOPS_LABELS:
        abnormal |= (df[c].map(str) == "True").to_numpy()
    half = len(X) // 2
    y = abnormal[half:].astype(int)
    yield "cobotops", X[:half], X[half:], y, runs(y.astype(bool))


def eds(root):
    """(id, train, test, y, segments) per file of the EDS set's test/ (trial 5 of each attack) by
    docs/bench/notes/unseen10_protocol.md (fixed before any run): every row a record, the 46 tags
    in the file's order (time and class dropped), class Attack abnormal; the first EDS_SPLIT of a
    file's rows before its first attack row are the train rows, the rest of the file its test rows."""
    import numpy as np
    import pandas as pd

    if not os.path.isdir(root):
        raise SystemExit(f"unseen: {root} not found (EDS: see unseen10_protocol.md)")
    files = sorted(f for f in os.listdir(root) if f.endswith("_5.csv"))
    if not files:
        raise SystemExit(f"unseen: no *_5.csv in {root}")
    for f in files:
        path = os.path.join(root, f)
        df = pd.read_csv(path)
        if EDS_TIME not in df.columns or EDS_LABEL not in df.columns:
            raise SystemExit(f"unseen: {path}: lacks {EDS_TIME!r} or {EDS_LABEL!r}")
        tags = df.drop(columns=[EDS_TIME, EDS_LABEL])
        if tags.shape[1] != EDS_TAGS or tags.isna().any().any():
            raise SystemExit(f"unseen: {path}: {tags.shape[1]} tags, {int(tags.isna().sum().sum())} missing cells "
                             f"(the protocol read {EDS_TAGS} and none)")
        marks = set(df[EDS_LABEL].astype(str))
        if marks - {"Normal", "Attack"} or "Attack" not in marks:
            raise SystemExit(f"unseen: {path}: labels {sorted(marks)} (the protocol read Normal, then Attack)")
        attack = (df[EDS_LABEL] == "Attack").to_numpy()
        X = tags.to_numpy(dtype=np.float64)
        p = int(EDS_SPLIT * int(np.argmax(attack)))
        y = attack[p:].astype(int)
        yield f[:-4], X[:p], X[p:], y, runs(y.astype(bool))


def alfa_score(flags, segs, step_s=ALFA_STEP_S):
    """ALFA's per-flight detection on one flight's test-row flags (Keipour et al. 2021; counted
    as docs/bench/notes/unseen8_protocol.md fixes): the first flagged row decides. A fault flight
    (segs: one sequence, its first row the onset) is "TP" with the detection time (first flag -
    onset) x step_s when that row is at or after the onset, "FP" before it, "FN" when nothing is
    flagged; a flight without a fault "TN" unflagged, "FP" flagged. Returns (outcome, seconds or
    None)."""
    import numpy as np

    hit = np.flatnonzero(np.asarray(flags, dtype=bool))
    if not segs:
        return ("FP" if hit.size else "TN"), None
    if len(segs) != 1:
        raise SystemExit(f"unseen: alfa_score: {len(segs)} faulty sequences in one flight (the protocol has one)")
    onset = segs[0][0]
    if not hit.size:
        return "FN", None
    if hit[0] < onset:
        return "FP", None
    return "TP", float(hit[0] - onset) * step_s


def alfa_summary(flights):
    """ALFA's figures over flights, each (outcome, seconds, has a fault) from alfa_score(): the
    counts, accuracy (TP + TN) / flights, precision TP / (TP + FP), recall TP / fault flights, F1,
    the mean and the maximum detection time of the detected (NaN when none) and how many of them
    within ALFA_TIMEOUT_S."""
    n = {k: sum(1 for o, _, _ in flights if o == k) for k in ("TP", "FP", "FN", "TN")}
    faults = sum(1 for _, _, f in flights if f)
    secs = [t for o, t, _ in flights if o == "TP"]
    acc = (n["TP"] + n["TN"]) / len(flights)
    prec = n["TP"] / (n["TP"] + n["FP"]) if n["TP"] + n["FP"] else 0.0
    rec = n["TP"] / faults if faults else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    mean = sum(secs) / len(secs) if secs else float("nan")
    return {"n": n, "acc": acc, "prec": prec, "rec": rec, "f1": f1, "mean_s": mean,
            "max_s": max(secs) if secs else float("nan"), "in_timeout": sum(1 for t in secs if t <= ALFA_TIMEOUT_S)}


def check_alfa():
    """alfa_score() and alfa_summary() against cases worked by hand (the run's only check of its scorer)."""
    import numpy as np

    bad = []
    y = np.zeros(10, dtype=int)
    y[6:] = 1  # a fault flight, onset at test row 6
    segs = runs(y.astype(bool))
    z = np.zeros(10, dtype=bool)

    def flagged(*rows):
        f = z.copy()
        f[list(rows)] = True
        return f

    cases = [("fault, nothing flagged", z, segs, ("FN", None)),
             ("fault, flagged at the onset", flagged(6), segs, ("TP", 0.0)),
             ("fault, first flag 3 rows after the onset", flagged(9), segs, ("TP", 3 * ALFA_STEP_S)),
             ("fault, a flag before the onset decides", flagged(5, 6, 7), segs, ("FP", None)),
             ("no fault, nothing flagged", z, [], ("TN", None)),
             ("no fault, one flag", flagged(0), [], ("FP", None))]
    for name, f, sg, want in cases:
        got = alfa_score(f, sg)
        if got[0] != want[0] or (want[1] is None) != (got[1] is None) or (want[1] is not None and abs(got[1] - want[1]) > 1e-12):
            bad.append(f"{name}: got {got}, want {want}")
    # 3 fault flights (TP at 0.15 s, TP at 6 s, early FP) and 2 without (TN, FP): accuracy 3/5,
    # precision 2/4, recall 2/3, F1 4/7, mean 3.075 s, max 6 s, 1 within 5 s
    got = alfa_summary([("TP", 0.15, True), ("TP", 6.0, True), ("FP", None, True), ("TN", None, False), ("FP", None, False)])
    want = {"n": {"TP": 2, "FP": 2, "FN": 0, "TN": 1}, "acc": 0.6, "prec": 0.5, "rec": 2 / 3, "f1": 4 / 7,
            "mean_s": 3.075, "max_s": 6.0, "in_timeout": 1}
    for k, v in want.items():
        if (got[k] != v) if isinstance(v, (dict, int)) else abs(got[k] - v) > 1e-12:
            bad.append(f"summary {k}: got {got[k]}, want {v}")
    if bad:
        raise SystemExit("unseen: alfa_score(): " + "; ".join(bad))
    print(f"alfa_score() equals {len(cases)} cases and alfa_summary() one case worked by hand")


def runs(mask):
    """Inclusive (start, end) of each run of True in mask."""
    import numpy as np

    m = np.concatenate([[False], np.asarray(mask, dtype=bool), [False]])
    d = np.flatnonzero(np.diff(m.astype(int)))
    return [(int(a), int(b) - 1) for a, b in zip(d[0::2], d[1::2])]


# ----------------------------------------------------------------------------- detectors


def pca_static(train, test):
    """The process-monitoring baseline TEP's literature reports (Chiang, Russell and Braatz
    2001): PCA fitted once on the train rows (normal operation), standardised by their mean and
    sd, with the fewest components that explain 90 % of their variance (a common rule, not tuned
    here); Hotelling's T^2 in the components and Q (the squared prediction error, SPE) in the
    residual. Its flags: the statistic over its 99th percentile on the train rows. Not a
    streaming detector: it never follows the stream, which is TEP's protocol for it."""
    import numpy as np

    mu, sd = train.mean(0), train.std(0, ddof=1)
    sd = np.where(sd > 0, sd, 1.0)
    Z = (train - mu) / sd
    _, S, Vt = np.linalg.svd(Z, full_matrices=False)
    var = S ** 2 / (len(Z) - 1)
    a = int(np.searchsorted(np.cumsum(var) / var.sum(), 0.9) + 1)
    P = Vt[:a].T

    def stats(X):
        z = (X - mu) / sd
        t = z @ P
        return (t ** 2 / var[:a]).sum(1), ((z - t @ P.T) ** 2).sum(1)

    t0, q0 = stats(train)
    t2, q = stats(test)
    return {"PCA T2 (fitted once)": (t2, t2 > np.quantile(t0, 0.99)), "PCA Q (fitted once)": (q, q > np.quantile(q0, 0.99))}


def series_outputs(sid, train, test, y, binary, bin_hash, config, cache, derive=(), derive_names=(), candidate=None):
    """{detector: (test score, test flags)} and {detector: seconds} for one series, cached: the
    peers by the data and their constants, outlierd by the data, its binary and its config (so
    that another binary or --config replays outlierd only); with derive (--peer-derive), the
    peers named in derive_names also as '<peer>+d' on the derived columns, each cached on its own
    by the data, its constants, the derivation and DERIVE_REVISION (never the one-column cache);
    with candidate (name, binary, its hash, config), a second outlierd column name (its combined
    score and flags), cached by the data, that binary and that config."""
    import numpy as np
    import pandas as pd

    X = np.vstack([train, test])
    p = len(train)
    h = hashlib.sha256()
    for a in (X, y):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(json.dumps([sid, p]).encode())

    def cached(kind, key, compute):
        k = h.copy()
        k.update(json.dumps(key).encode())
        path = os.path.join(cache, f"{sid}-{kind}-{k.hexdigest()[:16]}.npz")
        if os.path.exists(path):
            z = np.load(path)
            dets = sorted({k[2:] for k in z.files if k[:2] in ("S:", "F:")})
            return {d: (z["S:" + d], z["F:" + d]) for d in dets}, json.loads(str(z["secs"]))
        out, secs = compute()
        os.makedirs(cache, exist_ok=True)
        arrays = {f"S:{d}": s for d, (s, _) in out.items()}
        arrays.update({f"F:{d}": f for d, (_, f) in out.items()})
        np.savez(path + ".tmp.npz", secs=json.dumps(secs), **arrays)
        os.replace(path + ".tmp.npz", path)
        return out, secs

    def ours(binary=binary, config=config, name=None):
        out, secs = {}, {}
        with tempfile.TemporaryDirectory() as td:
            csv = os.path.join(td, "s.csv")
            lab = np.concatenate([np.zeros(p, dtype=int), y])
            pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])]).assign(label=lab).to_csv(csv, index=False)
            t0 = time.time()
            probation = max(p, 2)
            try:
                score, flags, _, recent = sbs.run_outlierd(binary, csv, probation, argparse.Namespace(config=config, replay_args=""))
            except SystemExit as e:
                # replay refuses a probation above its window (the first model is built of the
                # window's records) and names the most it takes: the train part is then longer
                # than the window (UCR, GECCO2018): its first window's worth is the probation
                # (the first model's records) and the rest of it replays as a stream, unscored
                m = re.search(r"--min-records (\d+) or fewer, or a larger --window", str(e))
                if not m:
                    raise
                probation = int(m.group(1))
                print(f"# {sid}: outlierd's probation {probation} (its window) of the {p} train rows", file=sys.stderr)
                score, flags, _, recent = sbs.run_outlierd(binary, csv, probation, argparse.Namespace(config=config, replay_args=""))
            if name is not None:  # a candidate column: its combined score and flags
                return {name: (score[p:], flags[p:])}, {name: time.time() - t0}
            secs["outlierd"] = secs["outlierd recent"] = time.time() - t0
            if recent is None:
                raise SystemExit(f"unseen: {sid}: outlierd wrote no recent column (detect.recent_scores off?)")
            out["outlierd"] = (score[p:], flags[p:])
            out["outlierd recent"] = (recent[p:], flags[p:])
        return out, secs

    revised = [d for d in PEERS if d in sbs.PEER_REVISION]  # mended since: never read from an older cache

    def peers():
        out, secs = {}, {}
        for name, (s, f, t) in sbs.peers(X, max(p, 2), names=[d for d in PEERS if d not in revised]).items():
            out[name], secs[name] = (s[p:], f[p:]), t
        return out, secs

    conf = ""
    if config:
        with open(config, "rb") as fh:
            conf = hashlib.sha256(fh.read()).hexdigest()
    out, secs = cached("ours", [bin_hash, conf], ours)
    if candidate:
        cname, cbin, chash, cconf = candidate
        cc = ""
        if cconf:
            with open(cconf, "rb") as fh:
                cc = hashlib.sha256(fh.read()).hexdigest()
        co, cs = cached("cand", [cname, chash, cc], lambda: ours(cbin, cconf, cname))
        out, secs = {**out, **co}, {**secs, **cs}
    po, ps = cached("peers", [sbs.W_FIT, sbs.B_FIT, sbs.N_MAD, sbs.Z_MAD, sbs.HST_Q], peers)
    po, ps = {d: v for d, v in po.items() if d not in revised}, {d: v for d, v in ps.items() if d not in revised}
    missing = [p for p in PEERS if p not in po]  # a peer added or mended since the cache was written: cached on its own

    def added():
        out, secs = {}, {}
        for name, (s, f, t) in sbs.peers(X, max(p, 2), names=missing).items():
            out[name], secs[name] = (s[p:], f[p:]), t
        return out, secs

    if missing:
        rev = {d: sbs.PEER_REVISION[d] for d in missing if d in sbs.PEER_REVISION}
        tag = ",".join(d + (str(rev[d]) if d in rev else "") for d in missing)  # PCA2: not the cache of PCA as first run
        pa, pas = cached("peers+" + tag, [sbs.W_FIT, sbs.B_FIT] + ([rev] if rev else []), added)
        po, ps = {**po, **pa}, {**ps, **pas}
    derived = []  # the derived columns, made once, only if some peer's cache lacks them

    def with_derived(name):
        def compute():
            if not derived:
                derived.append(derive_columns(X, derive))
            (s, f, t), = sbs.peers(derived[0], max(p, 2), names=[name]).values()
            return {name + DERIVE_SUFFIX: (s[p:], f[p:])}, {name + DERIVE_SUFFIX: t}
        return compute

    spec = [list(op) for op in derive]
    for name in derive_names:
        rev = sbs.PEER_REVISION.get(name, 1)
        tag = "+".join(f"{k}{last}" if last else k for k, last, _ in derive)
        pd_, pds = cached(f"{name}{rev}+d-{tag}", [sbs.W_FIT, sbs.B_FIT, sbs.N_MAD, sbs.Z_MAD, sbs.HST_Q, rev, spec,
                                                  DERIVE_REVISION], with_derived(name))
        po, ps = {**po, **pd_}, {**ps, **pds}
    return {**out, **po}, {**secs, **ps}


# ----------------------------------------------------------------------------- scorers


def best_f1(y, s):
    """The largest F1 over every threshold of s."""
    import numpy as np
    from sklearn.metrics import precision_recall_curve

    p, r, _ = precision_recall_curve(y, s)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
    return float(f.max())


def point_adjusted(s, segs):
    """s with each labelled row raised to its segment's maximum: a threshold then detects a
    segment wholly exactly when point adjustment would."""
    s = s.copy()
    for a, b in segs:
        s[a:b + 1] = s[a:b + 1].max()
    return s


def balanced_accuracy(y, flags):
    """The mean of the flags' recall on y's abnormal rows and their specificity on its normal
    ones: what 3W's scorer measures row-wise. Its notebook scores an instance by the micro-averaged
    F1 of the verdicts on as many abnormal as normal test samples (sklearn's
    precision_recall_fscore_support(average='micro'): for one label a sample, the accuracy), so
    its figure is the accuracy of a balanced test set, whose expectation this is; constant
    verdicts score 0.5. A class absent from y counts as its rows all right."""
    import numpy as np

    y, f = np.asarray(y, dtype=bool), np.asarray(flags, dtype=bool)
    tpr = f[y].mean() if y.any() else 1.0
    tnr = (~f[~y]).mean() if (~y).any() else 1.0
    return float((tpr + tnr) / 2)


def events(flags, segs):
    """telemanom's counts on flags: (true positive sequences, false negatives, false positive runs)."""
    fr = runs(flags)
    tp = sum(1 for a, b in segs if any(fa <= b and fb >= a for fa, fb in fr))
    fp = sum(1 for fa, fb in fr if not any(fa <= b and fb >= a for a, b in segs))
    return tp, len(segs) - tp, fp


def score_set(series, dets):
    """Figures per detector: means over series, pooled over their concatenation, event counts."""
    import numpy as np
    from sklearn.metrics import average_precision_score, roc_auc_score

    res = {}
    for d in dets:
        per = {"ap": [], "f1": [], "pa": [], "ba": [], "auc": [], "chance": []}
        ys, ss, pas = [], [], []
        tp = fn = fp = 0
        pt = pf = pn = 0  # point-wise counts of the detector's own flags (3W's scorer)
        secs = 0.0
        for sid, y, segs, outs, tsecs in series:
            s = sbs.clean(outs[d][0])
            pa = point_adjusted(s, segs)
            per["ap"].append(average_precision_score(y, s))
            per["chance"].append(float(np.mean(y)))  # a score without information: its AP's expectation
            if 0 < y.sum() < len(y):
                per["auc"].append(roc_auc_score(y, s))
            per["f1"].append(best_f1(y, s))
            per["pa"].append(best_f1(y, pa))
            ys.append(y), ss.append(s), pas.append(pa)
            a, b, c = events(outs[d][1], segs)
            tp, fn, fp = tp + a, fn + b, fp + c
            f, yb = np.asarray(outs[d][1], dtype=bool), y.astype(bool)
            pt, pf, pn = pt + int((f & yb).sum()), pf + int((f & ~yb).sum()), pn + int((~f & yb).sum())
            per["ba"].append(balanced_accuracy(yb, f))
            secs += tsecs[d]
        Y, S, PA = np.concatenate(ys), np.concatenate(ss), np.concatenate(pas)
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f05 = 1.25 * prec * rec / (0.25 * prec + rec) if prec + rec else 0.0
        flag_p = pt / (pt + pf) if pt + pf else 0.0
        flag_r = pt / (pt + pn) if pt + pn else 0.0
        res[d] = {"ap_mean": float(np.mean(per["ap"])), "f1_mean": float(np.mean(per["f1"])), "pa_mean": float(np.mean(per["pa"])),
                  "ap_pooled": float(average_precision_score(Y, S)), "f1_pooled": best_f1(Y, S), "pa_pooled": best_f1(Y, PA),
                  "ap_series": [float(v) for v in per["ap"]], "ev_tp": tp, "ev_fn": fn, "ev_fp": fp, "ev_p": prec, "ev_r": rec, "ev_f05": f05,
                  "ba_mean": float(np.mean(per["ba"])), "auc_mean": float(np.mean(per["auc"])) if per["auc"] else float("nan"), "chance_mean": float(np.mean(per["chance"])),
                  "pt_n": pt + pf, "pt_p": flag_p, "pt_r": flag_r, "pt_f1": 2 * flag_p * flag_r / (flag_p + flag_r) if flag_p + flag_r else 0.0, "secs": secs}
    return res


METRICS = [("ap_mean", "AP mean"), ("f1_mean", "F1 mean"), ("pa_mean", "PA-F1 mean"),
           ("ap_pooled", "AP pooled"), ("f1_pooled", "F1 pooled"), ("pa_pooled", "PA-F1 pooled"), ("ev_f05", "events F0.5")]


TEP_REFS = ("PCA T2 (fitted once)", "PCA Q (fitted once)")
TEP_HARD = ("d03", "d09", "d15")  # the faults the literature finds undetectable from these data


def score_tep(series, dets):
    """The TEP protocol (Chiang, Russell and Braatz, "Fault detection and diagnosis in industrial
    systems", 2001; the Braatz data's own use): each detector's control limit is the 99th
    percentile of its score on the normal-operation run d00_te (a 1 % false-alarm rate on normal
    operation), and each fault's detection rate is the share of its faulty rows (TEP_ONSET ..)
    over the limit; the false-alarm rate is the share of the fault runs' pre-fault rows over it.
    Beside it the detector's own flags (no limit chosen: FDR and FAR of its verdicts, and the share
    of d00_te flagged) and point-wise AP per fault run."""
    import numpy as np
    from sklearn.metrics import average_precision_score

    by = {sid: (y, outs) for sid, y, _, outs, _ in series}
    faults = [sid for sid in by if sid != "d00"]
    res = {}
    for d in dets:
        s0 = sbs.clean(by["d00"][1][d][0])
        limit = float(np.quantile(s0, 0.99))
        fdr, ap, delay = {}, [], []
        pre_over = pre_n = pre_flag = 0
        fdr_flag = {}
        for sid in faults:
            y, outs = by[sid]
            s, f = sbs.clean(outs[d][0]), np.asarray(outs[d][1], dtype=bool)
            over = s > limit
            fdr[sid] = float(over[TEP_ONSET:].mean())
            fdr_flag[sid] = float(f[TEP_ONSET:].mean())
            pre_over += int(over[:TEP_ONSET].sum())
            pre_flag += int(f[:TEP_ONSET].sum())
            pre_n += TEP_ONSET
            hit = np.flatnonzero(over[TEP_ONSET:])
            delay.append(int(hit[0]) if len(hit) else len(y) - TEP_ONSET)
            ap.append(average_precision_score(y, s))
        easy = [k for k in faults if k not in TEP_HARD]
        res[d] = {"limit": limit, "fdr": fdr, "fdr_all": float(np.mean(list(fdr.values()))),
                  "fdr_18": float(np.mean([fdr[k] for k in easy])), "far": pre_over / pre_n,
                  "flag_fdr_18": float(np.mean([fdr_flag[k] for k in easy])), "flag_far": pre_flag / pre_n,
                  "flag_d00": float(np.asarray(by["d00"][1][d][1], dtype=bool).mean()),
                  "ap_mean": float(np.mean(ap)), "delay_median": float(np.median(delay)),
                  "secs": sum(t[d] for _, _, _, _, t in series)}
    return res


def report_tep(res, md):
    print("\n**TEP (Braatz's data): 21 fault runs of 960 rows x 52 variables, each after d00.dat's 500 normal rows "
          "(probation), fault from row 160; d00_te, the normal run, sets each detector's 99 % control limit**\n")
    head = ["detector", "FDR mean, 18 faults", "FDR mean, 21", "FAR pre-fault", "delay median (rows)", "AP mean",
            "own flags: FDR 18", "FAR", "d00_te flagged", "s"]
    rows = [[d, sbs.fmt(r["fdr_18"]), sbs.fmt(r["fdr_all"]), sbs.fmt(r["far"]), f"{r['delay_median']:.0f}", sbs.fmt(r["ap_mean"]),
             sbs.fmt(r["flag_fdr_18"]), sbs.fmt(r["flag_far"]), sbs.fmt(r["flag_d00"]), f"{r['secs']:.0f}"] for d, r in res.items()]
    sbs.table(head, rows, md)
    print()
    faults = list(next(iter(res.values()))["fdr"])
    sbs.table(["fault"] + list(res), [[k] + [sbs.fmt(res[d]["fdr"][k]) for d in res] for k in faults], md)
    print()
    for k, h in (("fdr_18", "FDR mean of the 18 detectable faults"), ("ap_mean", "AP mean")):
        best = max(PEERS, key=lambda p: res[p][k])
        print(f"- {h}: best peer {best} {res[best][k]:.3f}; " +
              ", ".join(f"{o} {res[o][k]:.3f} ({res[o][k] - res[best][k]:+.3f})" for o in OURS))


def report(name, n_series, n_rows, n_pos, n_segs, res, md):
    print(f"\n**{name}: {n_series} series, {n_rows} test rows, {n_pos} labelled ({100 * n_pos / max(n_rows, 1):.1f} %), {n_segs} sequences**\n")
    head = ["detector"] + [h for _, h in METRICS[:6]] + ["events TP/FN/FP", "events P", "events R", "events F0.5", "s"]
    rows = []
    for d, r in res.items():
        rows.append([d] + [sbs.fmt(r[k]) for k, _ in METRICS[:6]] + [f"{r['ev_tp']}/{r['ev_fn']}/{r['ev_fp']}", sbs.fmt(r["ev_p"]),
                                                                    sbs.fmt(r["ev_r"]), sbs.fmt(r["ev_f05"]), f"{r['secs']:.0f}"])
    sbs.table(head, rows, md)
    print()
    for k, h in METRICS:
        best = max(PEERS, key=lambda p: res[p][k])
        ours = {o: res[o][k] - res[best][k] for o in OURS if o in res}
        if k == "ev_f05":  # flags: one detector, "outlierd recent" shares outlierd's verdicts
            ours = {"outlierd": ours["outlierd"]}
        verdict = ", ".join(f"{o} {res[o][k]:.3f} ({'+' if v >= 0 else ''}{v:.3f})" for o, v in ours.items())
        print(f"- {h}: best peer {best} {res[best][k]:.3f}; {verdict}")
    if name != "3W":
        # the verdicts row by row: where an alarm goes on past its labelled sequence (the stage's
        # cap limits alarm starts, not an alarm's records), events count one run, this every row
        print("\nEach detector's own flags row by row, pooled over the series (\"outlierd recent\" shares outlierd's):\n")
        sbs.table(["detector", "rows flagged", "precision", "recall", "F1"],
                  [[d, str(r["pt_n"]), sbs.fmt(r["pt_p"]), sbs.fmt(r["pt_r"]), sbs.fmt(r["pt_f1"])]
                   for d, r in res.items() if d != "outlierd recent"], md)
        print()
        if name == "BATADAL":  # the competition's ranking score on the flags (protocol: unseen7_protocol.md)
            print(f"BATADAL's ranking score on each detector's own flags (no threshold chosen): S = {BATADAL_GAMMA} S_TTD + "
                  f"{1 - BATADAL_GAMMA:g} S_CM; flagging nothing scores 0.25, flagging every row 0.75 (batadal_score()).\n")
            sbs.table(["detector", "S", "S_TTD", "S_CM", "attacks detected"],
                      [[d, sbs.fmt(r["batadal"][0]), sbs.fmt(r["batadal"][1]), sbs.fmt(r["batadal"][2]),
                        f"{r['batadal'][3]}/{n_segs}"] for d, r in res.items() if d != "outlierd recent"], md)
            print()
            best = max(PEERS, key=lambda p: res[p]["batadal"][0])
            print(f"- BATADAL's S: best peer {best} {res[best]['batadal'][0]:.3f}; "
                  f"outlierd {res['outlierd']['batadal'][0]:.3f} ({res['outlierd']['batadal'][0] - res[best]['batadal'][0]:+.3f})")
        if name == "ALFA":  # ALFA's per-flight detection on the flags (protocol: unseen8_protocol.md)
            a0 = res["outlierd"]["alfa"]
            print(f"ALFA's per-flight detection on each detector's own flags (no threshold chosen), all {a0['flights']} flights "
                  f"({a0['faults']} with a fault; {a0['rows']} test rows): the first flagged test row decides (alfa_score()); "
                  f"flagging nothing scores accuracy {(a0['flights'] - a0['faults']) / a0['flights']:.3f}, flagging every row 0.\n")
            sbs.table(["detector", "accuracy", "precision", "recall", "F1", "TP/FP/FN/TN", "detection time mean / max (s)",
                       f"detected within {ALFA_TIMEOUT_S:g} s"],
                      [[d, sbs.fmt(r["alfa"]["acc"]), sbs.fmt(r["alfa"]["prec"]), sbs.fmt(r["alfa"]["rec"]), sbs.fmt(r["alfa"]["f1"]),
                        "/".join(str(r["alfa"]["n"][k]) for k in ("TP", "FP", "FN", "TN")),
                        f"{r['alfa']['mean_s']:.2f} / {r['alfa']['max_s']:.2f}", str(r["alfa"]["in_timeout"])]
                       for d, r in res.items() if d != "outlierd recent"], md)
            print()
            best = max(PEERS, key=lambda p: res[p]["alfa"]["acc"])
            print(f"- ALFA's accuracy: best peer {best} {res[best]['alfa']['acc']:.3f}; "
                  f"outlierd {a0['acc']:.3f} ({a0['acc'] - res[best]['alfa']['acc']:+.3f})")
        if name.startswith("GECCO"):  # the challenge's own scorer is that table's F1 (protocol: unseen5_protocol.md)
            best = max(PEERS, key=lambda p: res[p]["pt_f1"])
            print(f"- the challenge's scorer, F1 of the flags row by row: best peer {best} {res[best]['pt_f1']:.3f}; "
                  f"outlierd {res['outlierd']['pt_f1']:.3f} ({res['outlierd']['pt_f1'] - res[best]['pt_f1']:+.3f})")
    if name == "3W":
        print("\n3W's scorer on each detector's own verdicts (no threshold chosen; \"outlierd recent\" shares outlierd's): "
              "balanced accuracy per instance, mean over the instances (balanced_accuracy()); beside it the abnormal "
              "class's precision, recall and F1 with the rows' counts summed over every instance. Flagging every test "
              f"row scores 0.500 and F1 {2 * n_pos / (n_rows + n_pos):.3f} ({100 * n_pos / max(n_rows, 1):.1f} % of the rows are abnormal).\n")
        sbs.table(["detector", "balanced accuracy mean", "precision", "recall", "F1"],
                  [[d, sbs.fmt(r["ba_mean"]), sbs.fmt(r["pt_p"]), sbs.fmt(r["pt_r"]), sbs.fmt(r["pt_f1"])]
                   for d, r in res.items() if d != "outlierd recent"], md)
        print()
        for k, h in (("ba_mean", "3W's balanced accuracy"), ("pt_f1", "the abnormal rows' F1")):
            best = max(PEERS, key=lambda p: res[p][k])
            print(f"- {h}: best peer {best} {res[best][k]:.3f}; outlierd {res['outlierd'][k]:.3f} ({res['outlierd'][k] - res[best][k]:+.3f})")
        # AP's floor is the abnormal share (most rows here), so the ranking is read by ROC AUC too
        print("- ROC AUC of the score, mean over the instances: " + ", ".join(f"{d} {r['auc_mean']:.3f}" for d, r in res.items()))
    if name == "EDS":  # AP's floor is the abnormal share (73 % of the test rows): ROC AUC beside (protocol)
        print(f"- ROC AUC of the score, mean over the series: " + ", ".join(f"{d} {r['auc_mean']:.3f}" for d, r in res.items())
              + f"; AP of a score without information: the abnormal share, {n_pos / max(n_rows, 1):.3f} pooled, "
              f"{res['outlierd']['chance_mean']:.3f} mean over the series")
    for o in OURS:
        won = ", ".join(f"{p} {sum(a > b for a, b in zip(res[o]['ap_series'], res[p]['ap_series']))}" for p in PEERS)
        print(f"- series where {o}'s AP beats the peer's (of {n_series}): {won}")


def ucr_hit(loc, seg, slack):
    """The archive's verdict on one series: loc (a test row) within slack rows of the labelled
    range seg = (first, last), both ends included."""
    return seg[0] - slack <= loc <= seg[1] + slack


def score_ucr(series, dets):
    """The UCR archive's protocol (KDD Cup 2021): each detector names one location per series, the
    test row of its highest score (the first, on ties; a NaN score, not scored, is lowest), and
    is correct where it lies within UCR_SLACK rows of the labelled range; the figure is the share of
    series correct. Beside it the variant of Rewicki, Denzler and Niebling ("Is it worth it?",
    Applied Sciences 13, 2023; dtaianomaly's UCRScore), whose slack is max(UCR_SLACK, the
    anomaly's length), and the score's ROC AUC and AP over each series' test rows, means."""
    import numpy as np
    from sklearn.metrics import average_precision_score, roc_auc_score

    res = {}
    for d in dets:
        hit, hit_l, auc, ap, loc = [], [], [], [], []
        secs = 0.0
        for sid, y, segs, outs, tsecs in series:
            s = sbs.clean(outs[d][0])
            (a, b), = segs
            i = int(np.argmax(s))
            loc.append(i)
            hit.append(ucr_hit(i, (a, b), UCR_SLACK))
            hit_l.append(ucr_hit(i, (a, b), max(UCR_SLACK, b - a + 1)))
            auc.append(roc_auc_score(y, s))
            ap.append(average_precision_score(y, s))
            secs += tsecs[d]
        res[d] = {"hit": hit, "hit_l": hit_l, "loc": loc, "acc": float(np.mean(hit)), "acc_l": float(np.mean(hit_l)),
                  "auc_mean": float(np.mean(auc)), "ap_mean": float(np.mean(ap)), "secs": secs}
    return res


def sign_test(w, l_):
    """The exact two-sided sign test's p of w against l_ discordant pairs (binomial, p = 1/2)."""
    from math import comb

    n = w + l_
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(w, l_) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def report_ucr(res, ids, n_rows, skipped, md):
    n = len(ids)
    print(f"\n**UCR anomaly archive: {n} series, {n_rows} test rows, one labelled anomaly each"
          + (f" ({len(skipped)} longer series left out by --ucr-max-rows)" if skipped else "") + "**\n")
    head = ["detector", f"correct (±{UCR_SLACK})", "share", f"correct (±max({UCR_SLACK}, length))", "share",
            "ROC AUC mean", "AP mean", "s"]
    rows = [[d, f"{sum(r['hit'])}/{n}", sbs.fmt(r["acc"]), f"{sum(r['hit_l'])}/{n}", sbs.fmt(r["acc_l"]),
             sbs.fmt(r["auc_mean"]), sbs.fmt(r["ap_mean"]), f"{r['secs']:.0f}"] for d, r in res.items()]
    sbs.table(head, rows, md)
    print()
    derived = [d for d in res if d.endswith(DERIVE_SUFFIX)]
    groups = [("best peer", list(PEERS))] + ([(f"best peer on the derived columns ({DERIVE_SUFFIX})", derived)] if derived else [])
    for k, h in (("acc", f"the archive's score (±{UCR_SLACK})"), ("acc_l", "its ±max(100, length) variant"),
                 ("auc_mean", "ROC AUC mean"), ("ap_mean", "AP mean")):
        for what, group in groups:
            best = max(group, key=lambda p: res[p][k])
            print(f"- {h}: {what} {best} {res[best][k]:.3f}; " +
                  ", ".join(f"{o} {res[o][k]:.3f} ({res[o][k] - res[best][k]:+.3f})" for o in OURS))
    for o in OURS:
        pair = []
        for p in list(PEERS) + derived:
            w = sum(a and not b for a, b in zip(res[o]["hit"], res[p]["hit"]))
            l_ = sum(b and not a for a, b in zip(res[o]["hit"], res[p]["hit"]))
            pair.append(f"{p} {w}/{l_} (p = {sign_test(w, l_):.2g})")
        print(f"- series {o} gets right and the peer wrong / the peer right and {o} wrong "
              f"(exact two-sided sign test on those): {', '.join(pair)}")
    anyone = [any(res[d]["hit"][i] for d in res) for i in range(n)]
    print(f"- series some detector here gets right: {sum(anyone)}/{n}; none: "
          + ", ".join(ids[i] for i in range(n) if not anyone[i])[:2000])


def main():
    args = parse_args()
    if args.check_derive:
        with open(DERIVE_GOLDEN) as fh:
            want = fh.read()
        got = derive_golden()
        bad = [n for n, (a, b) in enumerate(zip(want.splitlines(), got.splitlines()), 1) if a != b]
        if bad or len(want.splitlines()) != len(got.splitlines()):
            raise SystemExit(f"unseen: derive_columns() differs from {DERIVE_GOLDEN} at lines {bad[:10]} "
                             f"({len(got.splitlines())} lines against {len(want.splitlines())})")
        print(f"derive_columns() equals {DERIVE_GOLDEN} ({len(want.splitlines()) - 2} rows)")
        return
    if args.check_batadal:
        check_batadal()
        return
    if args.check_alfa:
        check_alfa()
        return
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="pyod")
    binary = args.binary or os.path.join(sbs.ROOT, "bin", "outlierd")
    if not args.binary:
        subprocess.check_call(["go", "build", "-o", binary, "./cmd/outlierd"], cwd=sbs.ROOT)
    with open(binary, "rb") as fh:
        bin_hash = hashlib.sha256(fh.read()).hexdigest()[:16]
    candidate = None
    if args.candidate:
        m = re.match(r"^([^=]+)=([^:]+)(?::(.+))?$", args.candidate)
        if not m:
            raise SystemExit(f"unseen: --candidate {args.candidate!r}: want NAME=BIN or NAME=BIN:CONFIG")
        with open(m.group(2), "rb") as fh:
            candidate = (m.group(1), m.group(2), hashlib.sha256(fh.read()).hexdigest()[:16], m.group(3) or "")
    only = set(filter(None, args.series.split(",")))
    started = time.time()
    results = []
    for set_name in args.sets.split(","):
        if set_name in ("smap", "msl"):
            src = smap_msl(args.smap_msl, set_name.upper())
        elif set_name == "smd":
            src = smd(args.smd)
        elif set_name == "smd8":
            src = interfusion(args.interfusion, "machine-")
        elif set_name == "asd":
            src = interfusion(args.interfusion, "omi-")
        elif set_name == "tep":
            src = tep(args.tep)
        elif set_name == "3w":
            skipped = []
            src = threew(args.threew, skipped)
        elif set_name == "ucr":
            skipped = []
            src = ucr(args.ucr, args.ucr_max_rows, skipped)
        elif set_name == "gecco2018":
            src = gecco2018(args.gecco2018)
        elif set_name == "gecco2017":
            src = gecco2017(args.gecco2017)
        elif set_name == "daphnet":
            skipped = []
            src = daphnet(args.daphnet, skipped)
        elif set_name == "batadal":
            src = batadal(args.batadal)
        elif set_name == "alfa":
            skipped = []
            src = alfa(args.alfa, skipped)
        elif set_name == "cobotops":
            src = cobotops(args.cobotops)
        elif set_name == "eds":
            src = eds(args.eds)
        else:
            raise SystemExit(f"unseen: --sets: unknown set {set_name!r} (smap, msl, smd, smd8, asd, tep, 3w, ucr, gecco2018, gecco2017, daphnet, batadal, alfa, cobotops, eds)")
        series = []
        t0 = time.time()
        for sid, train, test, y, segs in src:
            if only and sid not in only:
                continue
            outs, secs = series_outputs(sid, train, test, y, binary, bin_hash, args.config, args.cache,
                                        args.derive, args.derive_names, candidate)
            series.append((sid, y, segs, outs, secs))
            print(f"# {set_name} {sid}: {len(train)}+{len(test)} rows x {train.shape[1]}, {len(segs)} sequences "
                  f"({time.time() - t0:.0f} s)", file=sys.stderr)
        dets = list(OURS) + ([candidate[0]] if candidate else []) + list(PEERS) + [d + DERIVE_SUFFIX for d in args.derive_names]
        if set_name == "tep":
            srcs = {sid: (train, test) for sid, train, test, _, _ in tep(args.tep)}
            for sid, _, _, outs, secs in series:
                t0 = time.time()
                ref = pca_static(*srcs[sid])
                outs.update(ref)
                secs.update({k: time.time() - t0 for k in ref})
            results.append(("TEP", score_tep(series, dets + list(TEP_REFS))))
            continue
        if set_name == "ucr":
            print(f"# ucr: {len(skipped)} series over --ucr-max-rows {args.ucr_max_rows} left out: "
                  + "; ".join(f"{k} ({why})" for k, why in skipped), file=sys.stderr)
            n_rows = sum(len(y) for _, y, _, _, _ in series)
            results.append(("UCR", score_ucr(series, dets), [sid for sid, _, _, _, _ in series], n_rows, skipped))
            continue
        if set_name == "3w":
            print(f"# 3w: {len(skipped)} instances skipped by 3W's rules (a normal period of {THREEW_MIN_NORMAL} rows, "
                  "an event, a variable): " + "; ".join(f"{k} ({why})" for k, why in skipped), file=sys.stderr)
        if set_name == "daphnet":
            print(f"# daphnet: {len(skipped)} recordings skipped: " + "; ".join(f"{k} ({why})" for k, why in skipped), file=sys.stderr)
        if set_name == "alfa":
            print(f"# alfa: {len(skipped)} files skipped: " + "; ".join(f"{k} ({why})" for k, why in skipped), file=sys.stderr)
            # ALFA's per-flight detection counts every flight; the point-wise scorers (AP is
            # undefined without a positive) the fault flights only
            flights = series
            series = [s_ for s_ in series if s_[1].any()]
        res = score_set(series, dets)
        if set_name == "alfa":
            for d in dets:
                res[d]["alfa"] = alfa_summary([alfa_score(outs[d][1], segs) + (bool(y.any()),) for _, y, segs, outs, _ in flights])
                res[d]["alfa"].update(flights=len(flights), faults=len(series), rows=sum(len(y) for _, y, _, _, _ in flights))
        if set_name == "batadal":  # the competition's scorer on the one series' flags
            (_, y, segs, outs, _), = series
            for d in dets:
                res[d]["batadal"] = batadal_score(outs[d][1], segs, y)
        n_rows = sum(len(y) for _, y, _, _, _ in series)
        n_pos = sum(int(y.sum()) for _, y, _, _, _ in series)
        results.append((set_name.upper(), len(series), n_rows, n_pos, sum(len(s) for _, _, s, _, _ in series), res))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=sbs.ROOT, capture_output=True, text=True).stdout.strip()
    if candidate:
        print(f"candidate {candidate[0]!r}: binary {candidate[2]}, config {candidate[3] or '(default)'}")
    print(f"unseen {' '.join(sys.argv[1:])}: commit {commit}, binary {bin_hash}, config {args.config or '(default)'}, "
          f"{time.strftime('%Y-%m-%d %H:%MZ', time.gmtime(started))}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"{time.time() - started:.0f} s")
    for r in results:
        if r[0] == "TEP":
            report_tep(r[1], args.markdown)
        elif r[0] == "UCR":
            report_ucr(*r[1:], args.markdown)
        else:
            report(*r, args.markdown)


if __name__ == "__main__":
    sbs.ensure_venv(__file__)
    main()
