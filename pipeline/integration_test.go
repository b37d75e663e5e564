package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/detect"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// End-to-end tests of the pipeline: the sensor stream with injected anomalies and malformed
// messages goes through a 3-partition topic, the pipeline runs until its committed offsets
// reach the end of every partition and is stopped gracefully, and the outputs, the dead
// letters and the offsets are checked against what was produced and against the models that
// served. TestPipelineRealBroker runs against Apache Kafka (KAFKA_BOOTSTRAP), TestPipelineKfake
// against kfake in-process.

// sensorRun describes one end-to-end run.
type sensorRun struct {
	records     int
	anomalyRate float64       // fraction of readings shifted far from their mode
	badRate     float64       // fraction of malformed messages (dead letters)
	limit       time.Duration // how long the pipeline may take to commit everything
	tune        func(*Config) // changes to the default configuration, if any
}

func TestPipelineRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	// 200,000 records with the default configuration: a first model at 5,000 records and a
	// rebuild every 25,000, so about eight models serve during the run.
	runSensorCheck(t, br, sensorRun{records: 200_000, anomalyRate: 0.01, badRate: 0.005, limit: 150 * time.Second})
}

func TestPipelineKfake(t *testing.T) {
	br := testsupport.KfakeBroker(t)
	// A tenth of the records; refresh_records is lowered from 25,000 to 5,000 so that several
	// models serve in 20,000 records and the attribution of records to models is exercised.
	runSensorCheck(t, br, sensorRun{records: 20_000, anomalyRate: 0.01, badRate: 0.005, limit: 60 * time.Second,
		tune: func(c *Config) { c.Detect.RefreshRecords = 5000 }})
}

// runSensorCheck produces the stream, runs the pipeline with emit: outliers until everything
// is committed, stops it gracefully and checks every output, dead letter and offset.
func runSensorCheck(t *testing.T, br testsupport.Broker, run sensorRun) {
	const parts = 3
	in, out, dlq, group := testsupport.UniqueName("in"), testsupport.UniqueName("out"), testsupport.UniqueName("dlq"), testsupport.UniqueName("group")
	testsupport.CreateTopics(t, br, map[string]int{in: parts, out: parts, dlq: 1})
	input := newInput(in, parts, makeSensorRecords(t, run.records, parts, 7, run.anomalyRate, run.badRate))
	t0 := time.Now()
	produceSensors(t, br, input)
	t.Logf("%s: produced %d records to %s in %s", br.Name, run.records, in, time.Since(t0).Round(time.Millisecond))

	cfg := sensorConfig(br, in, out, dlq, group, sink.EmitOutliers)
	if run.tune != nil {
		run.tune(&cfg)
	}
	var trace *modelTrace
	r := startPipeline(t, cfg, func(p *Pipeline) { trace = traceModels(p, input) })
	doneAt := r.waitCommitted(t, br, group, input, run.limit)
	elapsed := doneAt.Sub(r.started)
	if err := r.stop(t, cfg.Run.ShutdownTimeout+10*time.Second); err != nil {
		t.Fatalf("graceful stop: Run returned %v, want nil", err)
	}
	st := r.p.Stats()
	t.Logf("%s: %d records committed in %s: %.0f records/s end to end (group join and the first model build included); %d flagged, %d dead letters, %d models, %d commits",
		br.Name, run.records, elapsed.Round(time.Millisecond), float64(run.records)/elapsed.Seconds(),
		st.Flagged.Load(), st.DeadLetters.Load(), len(trace.models), st.Commits.Load())

	// The committed offsets reach the end of every partition, and the final commit of the
	// graceful stop did not move them past it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	committed, err := testsupport.CommittedOffsets(ctx, br, group, in, parts)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := testsupport.EndOffsets(ctx, br, in, parts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ends, input.end) {
		t.Fatalf("the broker's end offsets %v differ from the produced ones %v", ends, input.end)
	}
	if !slices.Equal(committed, ends) {
		t.Errorf("committed offsets after the stop %v, want the ends %v", committed, ends)
	}

	valid, malformed := 0, 0
	for _, rec := range input.records {
		if rec.malformed {
			malformed++
		} else {
			valid++
		}
	}
	// Without a crash or rebalance every message is read exactly once.
	if got := st.RecordsIn.Load(); got != int64(valid) {
		t.Errorf("stats: %d records decoded, want %d (the valid messages, each once)", got, valid)
	}
	if got := st.DeadLetters.Load(); got != int64(malformed) {
		t.Errorf("stats: %d dead letters, want %d (the malformed messages, each once)", got, malformed)
	}

	checkDeadLetters(t, cfg, input, testsupport.ReadTopic(t, br, dlq, 1))
	checkOutputs(t, cfg, input, testsupport.ReadTopic(t, br, out, parts), trace)
}

// checkDeadLetters: every malformed message is in the dead-letter topic exactly once, with its
// value and key, its source coordinates in outlierd-source, in outlierd-error the very
// reason the decoder gives for it, in outlierd-reason that reason's word and in outlierd-field
// the field it names (no outlierd-field for malformed syntax); nothing else is there.
func checkDeadLetters(t *testing.T, cfg Config, in *sensorInput, dls []*kgo.Record) {
	t.Helper()
	k, err := cfg.Ingest.Check()
	if err != nil {
		t.Fatal(err)
	}
	dec := k.NewDecoder()
	decoded := cfg.Ingest.NewDecoded()
	seen := map[coord]int{}
	bad := 0
	for _, m := range dls {
		src, ok1 := testsupport.Header(m, sink.HeaderSource)
		reason, ok2 := testsupport.Header(m, sink.HeaderError)
		if !ok1 || !ok2 || reason == "" {
			t.Errorf("dead letter at offset %d lacks %s (%q) or %s (%q)", m.Offset, sink.HeaderSource, src, sink.HeaderError, reason)
			bad++
			continue
		}
		c, err := parseID(src, in.topic)
		if err != nil {
			t.Errorf("dead letter at offset %d: %s %q: %v", m.Offset, sink.HeaderSource, src, err)
			bad++
			continue
		}
		seen[c]++
		rec, ok := in.byCoord[c]
		switch {
		case !ok:
			t.Errorf("dead letter for %s, which was never produced", src)
		case !rec.malformed:
			t.Errorf("dead letter for the valid message %s: %s (reason %q)", src, rec.value, reason)
		case !bytes.Equal(m.Value, rec.value) || !bytes.Equal(m.Key, rec.key):
			t.Errorf("dead letter for %s carries key %q value %q, want %q %q", src, m.Key, m.Value, rec.key, rec.value)
		default:
			derr := dec.Decode(rec.value, decoded)
			if derr == nil || reason != derr.Error() {
				t.Errorf("dead letter for %s: reason %q, want the decoder's %v", src, reason, derr)
			}
			wantCode, wantField := "malformed", ""
			if fe := (*ingest.FieldError)(nil); errors.As(derr, &fe) {
				wantCode, wantField = fe.Reason.String(), fe.Field
			}
			if code, _ := testsupport.Header(m, sink.HeaderReason); code != wantCode {
				t.Errorf("dead letter for %s: %s %q, want %q (%v)", src, sink.HeaderReason, code, wantCode, derr)
			}
			if field, ok := testsupport.Header(m, sink.HeaderField); field != wantField || ok != (wantField != "") {
				t.Errorf("dead letter for %s: %s %q (%v), want %q (none when empty) (%v)", src, sink.HeaderField, field, ok, wantField, derr)
			}
		}
		if bad+len(seen) > 20 && t.Failed() {
			t.FailNow()
		}
	}
	missing, dups, want := 0, 0, 0
	for _, rec := range in.records {
		if !rec.malformed {
			continue
		}
		want++
		switch n := seen[coord{rec.p, rec.off}]; {
		case n == 0:
			missing++
			if missing <= 5 {
				t.Errorf("malformed message %d/%d is not in the dead-letter topic: %s", rec.p, rec.off, rec.value)
			}
		case n > 1:
			dups += n - 1
		}
	}
	if missing > 0 || dups > 0 {
		t.Errorf("dead letters: %d of %d malformed messages missing, %d duplicates (none expected without a crash)", missing, want, dups)
	}
	t.Logf("dead letters: %d messages for %d malformed inputs", len(dls), want)
}

// parseID parses "<topic>/<partition>/<offset>" of a message of topic.
func parseID(id, topic string) (coord, error) {
	rest, ok := strings.CutPrefix(id, topic+"/")
	p, off, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return coord{}, fmt.Errorf("not %s/<partition>/<offset>", topic)
	}
	pi, err1 := strconv.ParseInt(p, 10, 32)
	oi, err2 := strconv.ParseInt(off, 10, 64)
	if err1 != nil || err2 != nil {
		return coord{}, fmt.Errorf("not %s/<partition>/<offset>", topic)
	}
	return coord{int32(pi), oi}, nil
}

// verdict is one record's recomputed scores under one model.
type verdict struct {
	density  density.Verdict
	weight   float64
	distance bool
	outlier  bool
}

// checkOutputs checks the outputs of an emit: outliers run against the models that served.
//
// The assertion, and why it is exact. The trace (modelTrace) tells which model v scored each
// record. Recomputing the model's rule for every record with that model — the normalisation
// (x - Offset) * Scale in float32, the solving-set weight w_k(q, S_v) with the package's own
// ScoreBatch, the density verdict with the exact 1-D method the stage uses — must give the
// emitted set exactly: a record is in the output if and only if its combined verdict (density
// or distance, combine: any) is "outlier", and the output's weight, w*, verdicts and model
// version equal the recomputed ones bit for bit (JSON round-trips a float64 exactly). This is
// exact, not statistical: the solving-set weight is a deterministic function of the query and
// S_v, and in mode independent with exact 1-D probabilities the density verdict is the OR of
// eight per-dimension tests, so it does not depend on the per-record random subspace order.
//
// The exact distance rule w_k(q, D_window) >= w* is covered through it: S_v is a subset of
// the window D_v it was built from, so w_k(q, S_v) >= w_k(q, D_v) and every record the exact
// rule flags is flagged by the solving-set rule, hence (checked here) in the output. That S_v
// is a solving set of D_v is the solvingset package's tested property; what is observable
// here is checked too: every point of S_v is the normalised image of a valid record that was
// in the stream before model v started serving.
//
// Records of a partition that was absent from the window when a model was installed (not
// expected with three evenly read partitions) may have been scored by either of two models;
// for those not in the output the check is that some candidate model does not flag them, and
// their number is logged.
func checkOutputs(t *testing.T, cfg Config, in *sensorInput, outs []*kgo.Record, tr *modelTrace) {
	t.Helper()
	if tr.err != nil {
		t.Fatal(tr.err)
	}
	models := tr.models
	if len(models) == 0 {
		t.Fatal("no model ever served")
	}
	if cfg.Detect.Density.Mode != "independent" || cfg.Detect.Combine != detect.CombineAny {
		t.Fatalf("checkOutputs recomputes mode independent with combine any, the config has %s and %s",
			cfg.Detect.Density.Mode, cfg.Detect.Combine)
	}

	// Outputs: well-formed, about a produced valid message, unique per source offset.
	byCoord := map[coord]*outputRecord{}
	dups := 0
	for _, m := range outs {
		var o outputRecord
		if err := json.Unmarshal(m.Value, &o); err != nil {
			t.Fatalf("output at %d/%d is not JSON: %v: %s", m.Partition, m.Offset, err, m.Value)
		}
		c, err := parseID(o.ID, in.topic)
		if err != nil {
			t.Fatalf("output id %q: %v", o.ID, err)
		}
		if hid, _ := testsupport.Header(m, sink.HeaderID); hid != o.ID || c != (coord{o.Partition, o.Offset}) || o.Topic != in.topic {
			t.Fatalf("output %q: header id %q, topic %q, partition %d, offset %d disagree", o.ID, hid, o.Topic, o.Partition, o.Offset)
		}
		rec, ok := in.byCoord[c]
		if !ok || rec.malformed {
			t.Fatalf("output %q is not about a valid produced message", o.ID)
		}
		if o.PayloadEncoding != "json" || !bytes.Equal(o.Payload, rec.value) || !bytes.Equal(m.Key, rec.key) {
			t.Errorf("output %q: payload (%s) %s, key %q; want the input %s, key %q", o.ID, o.PayloadEncoding, o.Payload, m.Key, rec.value, rec.key)
		}
		if o.Scores == nil || o.ModelVersion < 1 || o.ModelVersion > uint64(len(models)) {
			t.Fatalf("output %q: scores %v, model version %d of %d (before_model hold scores every record)", o.ID, o.Scores, o.ModelVersion, len(models))
		}
		if _, seen := byCoord[c]; seen {
			dups++
			continue
		}
		oc := o
		byCoord[c] = &oc
	}
	if dups > 0 {
		t.Errorf("outputs: %d duplicate ids (none expected without a crash)", dups)
	}

	// Which model(s) may have scored each valid record.
	type cand struct {
		rec    *sensorRecord
		lo, hi int
		out    *outputRecord
	}
	var cands []cand
	groups := make([][]*sensorRecord, len(models)+1) // groups[v]: records to score with model v
	ambiguous := 0
	for _, rec := range in.records {
		if rec.malformed {
			continue
		}
		lo, hi := tr.versionRange(rec.p, rec.off)
		o := byCoord[coord{rec.p, rec.off}]
		if o != nil {
			v := int(o.ModelVersion)
			if v < lo || v > hi {
				t.Errorf("output %s was scored by model %d, the trace says %d..%d", o.ID, v, lo, hi)
			}
			lo, hi = v, v
		} else if lo < hi {
			ambiguous++
		}
		cands = append(cands, cand{rec, lo, hi, o})
		for v := lo; v <= hi; v++ {
			groups[v] = append(groups[v], rec)
		}
	}

	// Recompute every record's verdict under its candidate models.
	dp := density.Params{Eta: cfg.Detect.Density.Eta, Delta: cfg.Detect.Density.Delta, Samples: cfg.Detect.Density.Samples,
		Mode: density.Independent, Seed: cfg.Detect.Seed, Exact: true}
	verdicts := make([]map[*sensorRecord]verdict, len(models)+1)
	for v := 1; v <= len(models); v++ {
		// Model 1 is built (before_model: hold) from the very records it then scores: those
		// pushed before it served are members of its window and must not count themselves
		// (detect's scoreMembers). Later models are built from snapshots taken before the
		// records they score were pushed.
		member := func(r *sensorRecord) bool { return false }
		if v == 1 {
			member = func(r *sensorRecord) bool { l := tr.last[0][r.p]; return l >= 0 && r.off <= l }
		}
		verdicts[v] = scoreWith(t, models[v-1], groups[v], dp, member)
	}

	// The emitted set is exactly the flagged set; the emitted scores are the recomputed ones.
	flagged, missing, spurious, anomalies, anomaliesFlagged := 0, 0, 0, 0, 0
	byDensity, byDistance := 0, 0 // among flagged records that are not injected anomalies
	for _, c := range cands {
		if c.rec.anomaly {
			anomalies++
		}
		if c.out != nil {
			m := models[c.lo-1]
			vd := verdicts[c.lo][c.rec]
			if !vd.outlier {
				spurious++
				if spurious <= 5 {
					t.Errorf("output %s is not flagged by model %d: weight %v (w* %v), density %+v", c.out.ID, c.lo, vd.weight, m.Distance.WStar, vd.density)
				}
				continue
			}
			flagged++
			if c.rec.anomaly {
				anomaliesFlagged++
			} else {
				if vd.density.Outlier {
					byDensity++
				}
				if vd.distance {
					byDistance++
				}
			}
			checkScores(t, c.out, m, vd, c.rec, cfg)
			continue
		}
		notFlagged := false
		for v := c.lo; v <= c.hi; v++ {
			notFlagged = notFlagged || !verdicts[v][c.rec].outlier
		}
		if !notFlagged {
			missing++
			if missing <= 5 {
				vd := verdicts[c.lo][c.rec]
				t.Errorf("record %d/%d is flagged by model %d (weight %v, w* %v, distance %v, density %v) but not in the output",
					c.rec.p, c.rec.off, c.lo, vd.weight, models[c.lo-1].Distance.WStar, vd.distance, vd.density.Outlier)
			}
		}
	}
	if missing > 0 || spurious > 0 {
		t.Errorf("outputs: %d flagged records missing, %d outputs not flagged (of %d outputs)", missing, spurious, len(byCoord))
	}
	if flagged == 0 {
		t.Error("nothing was flagged: the check above would be vacuous")
	}
	if ambiguous > 0 {
		t.Logf("%d records not in the output could only be placed between two models (checked against either)", ambiguous)
	}
	t.Logf("outputs: %d flagged records checked against %d models; %d of %d injected anomalies flagged; of the %d other flagged records %d by density, %d by distance",
		flagged, len(models), anomaliesFlagged, anomalies, flagged-anomaliesFlagged, byDensity, byDistance)

	checkSolvingSets(t, in, tr)
}

// scoreWith recomputes the verdicts of recs under model m, as the detect stage computes them.
func scoreWith(t *testing.T, m *detect.Model, recs []*sensorRecord, dp density.Params, member func(*sensorRecord) bool) map[*sensorRecord]verdict {
	t.Helper()
	n := len(recs)
	out := make(map[*sensorRecord]verdict, n)
	if n == 0 {
		return out
	}
	raw, rawSD := make([][]float32, sensorDims), make([][]float32, sensorDims)
	for j := range sensorDims {
		raw[j], rawSD[j] = make([]float32, n), make([]float32, n)
		for i, r := range recs {
			raw[j][i], rawSD[j][i] = r.means[j], r.sds[j]
		}
	}
	nm, ns := m.Normalised(raw, rawSD) // the stage's normalisation
	dv := make([]density.Verdict, n)
	if err := m.Density.DetectRecords(nm, ns, dp, dv); err != nil {
		t.Fatalf("model %d: density: %v", m.Version, err)
	}
	w := make([]float64, n)
	m.Distance.ScoreBatch(nm, w, 0)
	var mi []int // members of the model's window: scored without counting themselves
	for i, r := range recs {
		if member(r) {
			mi = append(mi, i)
		}
	}
	if len(mi) > 0 {
		q := make([][]float32, sensorDims)
		for j := range q {
			for _, i := range mi {
				q[j] = append(q[j], nm[j][i])
			}
		}
		mw := make([]float64, len(mi))
		solvingset.KNNWeightsMembers(m.Distance.Points, q, m.Distance.K, 0, mw)
		for t, i := range mi {
			w[i] = mw[t]
		}
	}
	for i, r := range recs {
		dist := m.Distance.IsOutlier(w[i])
		out[r] = verdict{density: dv[i], weight: w[i], distance: dist, outlier: dv[i].Outlier || dist}
	}
	return out
}

// checkScores compares an output's scores with the recomputed verdict.
func checkScores(t *testing.T, o *outputRecord, m *detect.Model, vd verdict, rec *sensorRecord, cfg Config) {
	t.Helper()
	s := o.Scores
	if !s.Outlier || s.Weight != vd.weight || s.WStar != m.Distance.WStar || s.DistanceOutlier != vd.distance || s.DensityOutlier != vd.density.Outlier {
		t.Errorf("output %s: scores %+v; model %d recomputes weight %v, w* %v, distance %v, density %v",
			o.ID, *s, m.Version, vd.weight, m.Distance.WStar, vd.distance, vd.density.Outlier)
		return
	}
	// The eta-probability reported is the exact mass of the reported dimension (which one is
	// reported can depend on the record's random subspace order when masses tie, its value
	// cannot); for a density inlier it is the lowest over all dimensions.
	if len(o.Subspace) != 1 {
		t.Errorf("output %s: subspace %v, want one feature (mode independent)", o.ID, o.Subspace)
		return
	}
	j := slices.Index(m.Features, o.Subspace[0])
	if j < 0 {
		t.Errorf("output %s: subspace %v is not a feature", o.ID, o.Subspace)
		return
	}
	raw, rawSD := make([][]float32, sensorDims), make([][]float32, sensorDims)
	for d := range sensorDims {
		raw[d], rawSD[d] = []float32{rec.means[d]}, []float32{rec.sds[d]}
	}
	nm, ns := m.Normalised(raw, rawSD) // the stage's normalisation
	x, psi := float64(nm[j][0]), float64(ns[j][0])
	if eta := m.Density.EtaProbabilityExact(j, x, psi, cfg.Detect.Density.Eta); eta != s.EtaProbability {
		t.Errorf("output %s: eta-probability %v in %s, recomputed %v", o.ID, s.EtaProbability, o.Subspace[0], eta)
	}
	if !vd.density.Outlier && s.EtaProbability != vd.density.EtaProbability {
		t.Errorf("output %s: density inlier with eta-probability %v, the lowest over all features is %v", o.ID, s.EtaProbability, vd.density.EtaProbability)
	}
	if vd.density.Outlier && !(s.EtaProbability < cfg.Detect.Density.Delta) {
		t.Errorf("output %s: density outlier with eta-probability %v >= delta %v", o.ID, s.EtaProbability, cfg.Detect.Density.Delta)
	}
}

// checkSolvingSets: every solving-set point of every model is the normalised image of a valid
// record of the stream that was pushed into the window before the model started serving.
func checkSolvingSets(t *testing.T, in *sensorInput, tr *modelTrace) {
	t.Helper()
	for v, m := range tr.models {
		pts := m.Distance.Points
		if len(pts) != sensorDims || len(pts[0]) < m.Distance.K {
			t.Errorf("model %d: solving set of %d columns and %d points, want %d columns and at least k = %d points", v+1, len(pts), len(pts[0]), sensorDims, m.Distance.K)
			continue
		}
		want := map[[sensorDims]uint32][]int{}
		var f [sensorDims]uint32
		for i := range pts[0] {
			for j := range f {
				f[j] = math.Float32bits(pts[j][i])
			}
			want[f] = append(want[f], i)
		}
		found := make([]bool, len(pts[0]))
		last := tr.last[v]
		raw := make([][]float32, sensorDims)
		for _, r := range in.records {
			for j := range raw {
				raw[j] = append(raw[j], r.means[j])
			}
		}
		norm, _ := m.Normalised(raw, nil) // the stage's normalisation
		for i, r := range in.records {
			if r.malformed || (last[r.p] >= 0 && r.off > last[r.p]) {
				continue
			}
			for j := range f {
				f[j] = math.Float32bits(norm[j][i])
			}
			for _, i := range want[f] {
				found[i] = true
			}
		}
		if n := len(found) - countTrue(found); n > 0 {
			t.Errorf("model %d: %d of %d solving-set points are not records of the stream seen before the model served", v+1, n, len(found))
		}
		t.Logf("model %d: window %d, |S| = %d, w* = %.6g, built in %s", v+1, m.WindowRecords, len(pts[0]), m.Distance.WStar, m.BuildTime.Round(time.Millisecond))
	}
}

func countTrue(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}
