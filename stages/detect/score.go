package detect

import (
	"fmt"
	"math"
	"runtime"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// scoreScratch holds buffers reused batch after batch on the stage's goroutine (each detector
// keeps its own).
type scoreScratch struct {
	means, sds [][]float32
	streams    []uint64
}

// Normalised maps raw means and uncertainties (column-major) to the model's units, exactly as
// the stage does before scoring (new slices).
func (m *Model) Normalised(means, sds [][]float32) (nm, ns [][]float32) {
	return m.normalised(means, sds, nil)
}

// normalised maps raw means and uncertainties to the model's [0,1] space; with a scratch
// the buffers are reused (the result is valid until the next call with the same scratch).
func (m *Model) normalised(means, sds [][]float32, sc *scoreScratch) (nm, ns [][]float32) {
	var bufM, bufS [][]float32
	if sc != nil {
		bufM, bufS = sc.means, sc.sds
	}
	if len(bufM) != len(means) {
		bufM, bufS = make([][]float32, len(means)), make([][]float32, len(means))
	}
	rows := 0
	if len(means) > 0 {
		rows = len(means[0])
	}
	for j := range means {
		if cap(bufM[j]) < rows {
			bufM[j] = make([]float32, rows)
		}
		if cap(bufS[j]) < rows {
			bufS[j] = make([]float32, rows)
		}
		bufM[j], bufS[j] = bufM[j][:rows], bufS[j][:rows]
	}
	onRows(rows, func(lo, hi int) { // (a batch's, on the stage's goroutine: by rows on the cores)
		for j := range means {
			normalise(means[j][lo:hi], m.Offset[j], m.Scale[j], bufM[j][lo:hi])
			if sds == nil || sds[j] == nil {
				clear(bufS[j][lo:hi])
				continue
			}
			for i, v := range sds[j][lo:hi] {
				bufS[j][lo+i] = scaleSD(v, m.Scale[j])
			}
		}
	})
	if sc != nil {
		sc.means, sc.sds = bufM, bufS
	}
	return bufM, bufS
}

// score fills b.Scores: every detector writes its fields (Stage.detectors, in order), then
// decide takes the flag from them. It is begin and finish back to back on the first lane, the
// device call made inline (overlap.go runs the two halves a batch apart).
func (s *Stage) score(b *batch.Batch) error {
	sc, err := s.begin(b, 0, false)
	if err != nil {
		return err
	}
	return s.finish(sc)
}

// keyedBeside runs a synchronous batch's keys' pass beside its global scoring (a variable: the
// tests compare it with the pass after the global scoring).
var keyedBeside = true

// scoreKeyedBeside starts the batch's keys' pass (keyedScorer.score: the keys' windows, device
// call, decisions and builds) on a goroutine, beside the global scoring (the normalisation's
// rest, the global model's device call and its detectors' fields), which reads nothing the pass
// writes: the pass writes its records' scores into a slice of its own, merged into b.Scores
// after the global decision (mergeKeyed), where it overwrote them before; the keys' state is
// the pass's alone, and warmRows, which the global scoring reads, is done before it starts.
// With batches overlapped (overlap.go) the same pass starts once the batch before finished
// (startChained), warmRows read there, and the global scoring of the rows it leaves beside it.
// Only with the keys' models on a device: on a GPU host the keys' walk, decisions and builds run
// while the stage's goroutine waits on the global model's device call (the keys' call queues
// behind it on the device's thread); on the CPU the global model's steps take every core
// themselves, and the pass beside them measured 1-2% more CPU a record (docs/BENCHMARKS.md
// §13.1.3), as prescore's reasoning (calibrate.go).
func (s *Stage) scoreKeyedBeside(sc *scoring, raw [][]float32) {
	// The keys' scores are the previous batch's memory, cleared by mergeKeyed (a new allocation's
	// first writes cost more than the work: docs/BENCHMARKS.md §13.1.4); a batch that ended in an
	// error keeps its own and the next one allocates.
	n := sc.b.Len()
	ks := s.keyedScores
	s.keyedScores = nil
	if cap(ks) < n {
		ks = make([]batch.Score, n)
	}
	sc.keyed = ks[:n]
	sc.keyedDone = make(chan struct{})
	cfg := &s.cfg
	if sc.chained {
		cfg = &sc.cfg // (the configuration the batch began under: the same, Reconfigure settles)
	}
	s.keyed.hand.start(s.series.pos) // (the batch before finished: its capAlarms took its rows)
	go func() {
		defer close(sc.keyedDone)
		s.keyed.score(cfg, s.features, sc.b, raw, sc.keyed)
	}()
}

// mergeKeyed writes into scores the keys' pass's fields of keyed (keyedScorer.score's: those
// decideByKey writes for a record its key's model scored, the global model's fields cleared,
// Warming for one it left to the global model), as the pass would have written them into
// scores itself after the global decision, and clears keyed (the next batch's keys' scores).
func mergeKeyed(scores, keyed []batch.Score) {
	n := len(scores)
	onChunks(n, max(1, min(runtime.GOMAXPROCS(0), n/scoresGrain)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			k, sc := &keyed[i], &scores[i]
			switch {
			case k.ByKey:
				sc.DensityScore, sc.DistanceScore, sc.Score, sc.Threshold = k.DensityScore, k.DistanceScore, k.Score, k.Threshold
				sc.Outlier, sc.Suppressed, sc.Held, sc.ByKey, sc.Warming = k.Outlier, k.Suppressed, k.Held, true, false
				sc.KeyModelVersion, sc.Deviations = k.KeyModelVersion, k.Deviations
				clearGlobalFields(sc)
			case k.Warming:
				sc.Warming = true
			}
			*k = batch.Score{}
		}
	})
}

// onRows runs f over the rows [0, n) cut into chunks of at least scoresGrain rows, each on a
// goroutine, and waits; f(0, n) on the caller's goroutine where there is one chunk.
func onRows(n int, f func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/scoresGrain)
	if workers <= 1 {
		f(0, n)
		return
	}
	onChunks(n, workers, f)
}

// scoresGrain is the fewest records' scores a goroutine of begin initialises.
const scoresGrain = 4096

// begin is a batch's scoring up to the device: the normalisation, the stream indices, the
// prescorers' CPU work started on the cores, and the detectors' device steps in one
// accelerator call, made inline or (async) on a goroutine of the batch's own (scoreAsync, with
// the stateless detectors' fields after it). Everything it writes is lane's (the lane's
// detectors and scratch). Under key_by the global model scores only the records whose key has
// no model of its own when the batch begins (globalRows): a warm key's record is its key's
// model's alone.
func (s *Stage) begin(b *batch.Batch, lane int, async bool) (*scoring, error) {
	m := s.model
	means, sds, err := s.columns(b)
	if err != nil {
		return nil, err
	}
	_, scratch := s.lane(lane)
	n := b.Len()
	sc := &scoring{b: b, lane: lane, raw: means, sds: sds}
	streams, err := streamIndices(b, scratch.streams)
	if err != nil {
		return nil, err
	}
	scratch.streams = streams // (the lane's until the batch finished: startGlobal may read them later)
	switch {
	case s.keyed != nil && async && keyedBeside && s.keyedDevice: // (keyed.dev: the running pass's)
		// Batches overlapped: the batch's keys' pass runs on its own goroutine once the batch
		// before it finished (startChained), beside the stage's other work. The keys' state is
		// that pass's until then, so which records' keys have a model is known only then: the
		// global model's scoring starts there too, on those rows alone (deferred), unless the
		// stream is mostly cold (speculate): then it starts now on every record, the keys' pass
		// clearing its fields on the records their key scored (mergeKeyed: the same outputs).
		sc.chained = true
		sc.deferred = !s.speculate()
	case s.keyed != nil:
		sc.warm = s.keyed.warmRows(b)
		if !async && keyedBeside && s.keyed.dev != nil {
			s.scoreKeyedBeside(sc, means)
		}
	}
	b.Scores = make([]batch.Score, n)
	initScores(b.Scores)
	if async {
		sc.cfg = s.cfg // the goroutine reads it while Process goes on (Reconfigure settles first)
	}
	if sc.deferred {
		sc.q.Model = m // (the model serving when the batch began scores it: startChained)
		return sc, nil
	}
	s.startGlobal(sc, m, async)
	return sc, nil
}

// startGlobal starts the global model m's scoring of the batch's rows of keys without a model
// (sc.warm; all rows when nil): their normalisation, the prescorers' CPU work on the cores, and
// the detectors' device steps in one accelerator call, made inline or (async) on a goroutine of
// the batch's own (scoreAsync, with the stateless detectors' fields after it). It writes only
// the batch's lane.
func (s *Stage) startGlobal(sc *scoring, m *Model, async bool) {
	dets, scratch := s.lane(sc.lane)
	sc.rows = globalRows(sc.warm)
	sc.q, sc.out = s.globalQuery(m, sc.b, sc.raw, sc.sds, scratch.streams, sc.rows, scratch)
	if async {
		sc.q.Cfg = &sc.cfg
	}
	if sc.rows != nil && len(sc.out) == 0 {
		// Every record's key has a model: the global model scores none (no call).
		if async {
			sc.done = closedChan // (scored: Landing, finish)
		}
		return
	}
	for _, d := range dets {
		if p, ok := d.(prescorer); ok {
			p.prescore(&sc.q, len(sc.out))
		}
	}
	plan := planDevice(s.deps.Accelerator, dets, &sc.q)
	switch {
	case async:
		sc.q.planned = plan != nil
		s.scoreAsync(sc, dets, plan)
	case plan != nil:
		sc.q.planned = true
		sc.err = runPlan(s.deps.Accelerator, plan)
	}
}

// initScores sets every score to a scored record's before any detector writes it: no combined
// score, no threshold.
func initScores(scores []batch.Score) {
	n := len(scores)
	onChunks(n, max(1, min(runtime.GOMAXPROCS(0), n/scoresGrain)), func(lo, hi int) { // (a large batch's scores are megabytes)
		for i := lo; i < hi; i++ {
			scores[i] = batch.Score{Scored: true, Score: math.NaN(), Recent: math.NaN(), Threshold: math.Inf(1), DensityScore: math.NaN(), DistanceScore: math.NaN()}
		}
	})
}

// globalScoresAll makes the global model score every record under key_by too, its fields then
// cleared on the records their key's model scored (a variable: the tests compare it with
// scoring only the records of keys without a model).
var globalScoresAll = false

// globalRows are the rows the global model scores under key_by, those not in warm (the records
// whose key had a model when the batch began: startChained's with the batch's keys' pass
// chained); nil for every row (key_by none, no key warm). The global model is the model of the
// keys still warming: a warm key's record is judged by its key's model alone, and the global
// detectors' fields (the paper's density and solving-set verdicts, eta-probability, w_k(q,S),
// w*, subspace, hypercube) would only ride along on it (about 10% of the stage's wall at a
// million keys, docs/BENCHMARKS.md §13.1.8, §13.1.11, §13.1.12). The global model still learns
// from every record (pushBatch): it scores new keys, drawn from the whole fleet.
func globalRows(warm []bool) []int {
	if warm == nil || globalScoresAll {
		return nil
	}
	return rowsWhereNot(warm)
}

// rowsWhereNot are the rows i with !marks[i], in order.
func rowsWhereNot(marks []bool) []int {
	rows := make([]int, 0, 64)
	for i, w := range marks {
		if !w {
			rows = append(rows, i)
		}
	}
	return rows
}

// globalQuery is the global model's Query of b's rows (nil: all of them) and the scores its
// detectors write: b.Scores itself for all rows, else scores of their own (scatterScores puts
// them back). means, sds and streams are the whole batch's; scratch (nil: new buffers) holds
// the normalised rows.
func (s *Stage) globalQuery(m *Model, b *batch.Batch, means, sds [][]float32, streams []uint64, rows []int, scratch *scoreScratch) (Query, []batch.Score) {
	out := b.Scores
	if rows != nil {
		means, sds = pick(means, rows), pickCols(sds, rows)
		picked := make([]uint64, len(rows))
		for t, i := range rows {
			picked[t] = streams[i]
		}
		streams = picked
		out = make([]batch.Score, len(rows))
		initScores(out)
	}
	means = imputedColumns(m, b, means, rows, s.unreadCycles(m)) // (a warming value from its record's neighbours: warmup_impute.go; a time column too, cycles.go)
	nm, ns := m.normalised(means, sds, scratch)
	q := Query{Model: m, Cfg: &s.cfg, Raw: means, Means: nm, SDs: ns, Density: s.densityParams(), Batch: b, Rows: rows,
		Uncounted: s.uncountedQuery(b, rows)}
	q.Density.Index = streams
	return q, out
}

// pickCols is pick of column-major cols, nil for nil (no uncertainty columns).
func pickCols(cols [][]float32, rows []int) [][]float32 {
	if cols == nil {
		return nil
	}
	return pick(cols, rows)
}

// scatterScores writes the global model's scores of rows (nil: all, already in place) into
// scores.
func scatterScores(scores, global []batch.Score, rows []int) {
	for t, i := range rows {
		scores[i] = global[t]
	}
}

// scoreGlobal is the rest of the global model's scoring once its device call has returned:
// each detector's fields into sc.out, the decision, and sc.out into the batch's scores.
func (s *Stage) scoreGlobal(sc *scoring, dets []Detector) error {
	if sc.rows != nil && len(sc.out) == 0 { // (begin started nothing)
		return nil
	}
	for _, d := range dets {
		if err := d.Score(&sc.q, sc.out); err != nil {
			return err
		}
	}
	decide(&s.cfg, sc.q.Model.Ranker != nil, sc.out)
	scatterScores(sc.b.Scores, sc.out, sc.rows)
	return nil
}

// scoreLeftOver scores with the global model the records it left to their key (warm when the
// batch began) that no key's model scored: their key was evicted before them within the batch
// (keyed.go's serial path, a new key past keys.max_keys or keys.max_bytes), so they are a cold
// key's records now. Synchronously, on the batch's lane (its detectors are done with the batch):
// the same fields as if the global model had scored them with the rest (their Warming kept).
func (s *Stage) scoreLeftOver(sc *scoring) error {
	if sc.rows == nil {
		return nil
	}
	b := sc.b
	var late []int
	for i, w := range sc.warm {
		if w && !b.Scores[i].ByKey {
			late = append(late, i)
		}
	}
	if len(late) == 0 {
		return nil
	}
	means, sds, err := s.columns(b)
	if err != nil {
		return err
	}
	streams, err := streamIndices(b, nil)
	if err != nil {
		return err
	}
	dets, _ := s.lane(sc.lane)
	left := &scoring{b: b, lane: sc.lane, rows: late}
	left.q, left.out = s.globalQuery(sc.q.Model, b, means, sds, streams, late, nil)
	left.q.Cfg = sc.q.Cfg
	if plan := planDevice(s.deps.Accelerator, dets, &left.q); plan != nil {
		left.q.planned = true
		if err := runPlan(s.deps.Accelerator, plan); err != nil {
			return err
		}
	}
	for t, i := range late {
		left.out[t].Warming = b.Scores[i].Warming
	}
	return s.scoreGlobal(left, dets)
}

// finish is the rest of a batch's scoring once its device call has returned: each detector's
// fields (those computed beside the device call by begin's goroutine, then the followers'),
// the decision, the keys' models, the alarm cap and the significance marks (in stream order:
// batches finish in the order they began), the alert groups and the explanations.
func (s *Stage) finish(sc *scoring) error {
	defer func() { // (returning an error too: the keys' pass ends before the batch is dropped)
		sc.waitKeyed()
		if s.keyed != nil {
			s.keyed.finishBuilds() // (the builds the keys' pass left to run beside the rest)
		}
	}()
	b, m := sc.b, sc.q.Model
	dets, _ := s.lane(sc.lane)
	if sc.done != nil {
		<-sc.done
		dets = s.followerDetectors()
	}
	if sc.err != nil {
		return sc.err
	}
	if err := s.scoreGlobal(sc, dets); err != nil {
		return err
	}
	if s.keyed != nil {
		if sc.keyedDone != nil { // warm keys: their own model decides
			<-sc.keyedDone
			mergeKeyed(b.Scores, sc.keyed)
			s.keyedScores, sc.keyed = sc.keyed[:0], nil
		} else {
			s.keyed.hand.start(s.series.pos)
			s.keyed.score(&s.cfg, s.features, b, sc.raw, b.Scores)
		}
		if err := s.scoreLeftOver(sc); err != nil {
			return err
		}
	}
	unread := s.unreadCycles(m)                                             // (the cyclic columns m does not read: cycles.go)
	s.capAlarmsBy(b, m.Ranker != nil, s.recs.blind != nil && unread != nil) // (blind marks: cycles_rejudge.go)
	s.rankRecent(b, m.Ranker)
	s.groups.fold(b, s.cfg.AlertCooldown)
	explainDeviations(m.Ranker, m.Features, centredColumns(m, b, sc.raw, nil, unread), b.Scores, false) // (a warming column at the median: never named)
	b.ModelVersion = m.Version
	return nil
}

// prescorer is a Detector with CPU work that can start before the detectors score, to run on
// the cores while the others' steps run on the GPU; its Score waits for that work.
type prescorer interface {
	prescore(q *Query, n int)
}

func (s *Stage) densityParams() density.Params {
	// Exact: 1-D subspaces are integrated exactly (no sampling noise, and fast enough for a
	// stream). Index (set by score) gives each record the stream of its identity.
	return density.Params{Eta: s.cfg.Density.Eta, Delta: s.cfg.Density.Delta, Samples: s.cfg.Density.Samples,
		Mode: s.cfg.Density.Mode.Algo(), Seed: s.cfg.Seed, Exact: true}
}

// streamIndices are the batch's records' density stream indices, from their identity (topic,
// partition, offset: batch.StreamIndex), so a redelivered record draws the same samples and gets
// the same verdict after a restart, whatever batch it arrives in. dst is reused when large enough.
func streamIndices(b *batch.Batch, dst []uint64) ([]uint64, error) {
	parts, offs := b.Partitions(), b.Offsets()
	n := b.Len()
	if len(parts) != n || len(offs) != n {
		return nil, fmt.Errorf("detect: batch has no %s/%s columns of %d rows", batch.ColPartition, batch.ColOffset, n)
	}
	if cap(dst) < n {
		dst = make([]uint64, n)
	}
	dst = dst[:n]
	th := batch.TopicHashOf(b.Topic)
	for i := range n {
		dst[i] = th.StreamIndex(parts[i], offs[i])
	}
	return dst, nil
}

// rescoreMembers rescores, with solvingset.KNNWeightsMembers against ref (k neighbours), the
// query's records that belong to m's window by identity (Members): a record of the window is
// not its own neighbour. nm are the query's records in ref's space; weights are overwritten for
// those records only.
func rescoreMembers(m *Model, q *Query, ref [][]float32, k int, nm [][]float32, weights []float64) {
	if len(m.Members.Ranges) == 0 {
		return
	}
	b := q.Batch
	parts, offs := b.Partitions(), b.Offsets()
	var idx []int
	for i := range weights {
		row := i
		if q.Rows != nil {
			row = q.Rows[i]
		}
		if m.Members.contains(b.Topic, parts[row], offs[row]) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	w := make([]float64, len(idx))
	solvingset.KNNWeightsMembers(ref, pick(nm, idx), k, 0, w)
	for t, i := range idx {
		weights[i] = w[t]
	}
}
