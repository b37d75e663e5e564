package metrics

import (
	"sync"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/outlierd/outlierd/internal/core/batch"
)

// The live view's feed: a bounded, in-memory record of what the pipeline recently scored,
// read by the page at / (liveview.go). The sink goroutine hands each acknowledged batch over
// (OfferBatch): a few sampled records per batch for the chart, every flagged record for the
// alerts, copied under one short lock; the page's readers render them on their own
// goroutines. Nothing here ever blocks the pipeline on a reader: readers copy out under the
// same lock and are never waited for.

// Sizes of the feed's rings. A page keeps its own history beyond them; the rings are what a
// page that opens now is first shown.
const (
	// livePointsPerBatch is how many records of each batch the chart samples (evenly spaced):
	// at the demo's 5,000 records/s in ~20 batches/s, 320 points/s, enough for a curve per key
	// of the demo's 64 sensors without the page holding millions of points.
	livePointsPerBatch = 16
	// livePointCap points cover about 30 s of the demo's rate.
	livePointCap = 8192
	// liveAlertCap is the flagged records kept: the newest, as a table shows them.
	liveAlertCap = 512
	// liveModelCap is the model versions kept.
	liveModelCap = 32
	// liveKeyMax bounds the bytes of a record's key the feed keeps (cut on a rune boundary and
	// marked "…"): the keys are whoever writes to the input topic's, up to a message's size, and
	// the rings hold 8,704 of them.
	liveKeyMax = 256
)

// livePoint is one sampled scored record.
type livePoint struct {
	seq       uint64
	at        int64 // unix ms when the broker acknowledged its batch's outputs
	key       string
	score     float64
	threshold float64
	outlier   bool
	// suppressed: over the threshold, not flagged (the alarm cap of flag_by: significance).
	suppressed bool
}

// liveAlert is one flagged record, with what its explanation is made of.
type liveAlert struct {
	seq       uint64
	at        int64 // unix ms, as livePoint.at
	recordAt  int64 // the record's own _timestamp (unix ms), 0 when unknown
	topic     string
	partition int32
	offset    int64
	key       string
	model     uint64
	features  []string // the batch's feature names (shared, never written)
	values    []float32
	warming   []string    // the feature columns still warming on the record (batch.Batch.Warming); nil: none
	score     batch.Score // a copy; its slices are the model's or fresh per batch, never reused
}

// liveModel is one model version as it started serving.
type liveModel struct {
	seq  uint64
	at   int64 // unix ms when it started serving here
	info ModelInfo
}

// ring is a bounded FIFO of items numbered by a sequence (1, 2, ...): readers ask for what
// came after the last sequence they saw.
type ring[T any] struct {
	items []T
	next  uint64 // sequence of the next item (items hold next-len .. next-1)
}

func newRing[T any](capacity int) ring[T] { return ring[T]{items: make([]T, 0, capacity), next: 1} }

// push appends v (set is told its sequence), evicting the oldest item when full.
func (r *ring[T]) push(v T, set func(*T, uint64)) {
	set(&v, r.next)
	if len(r.items) < cap(r.items) {
		r.items = append(r.items, v)
	} else {
		r.items[int((r.next-1)%uint64(cap(r.items)))] = v
	}
	r.next++
}

// since appends to dst the items with a sequence > after, oldest first.
func (r *ring[T]) since(dst []T, after uint64) []T {
	n := uint64(len(r.items))
	first := r.next - n // sequence of the oldest item held
	if after+1 > first {
		first = after + 1
	}
	for s := first; s < r.next; s++ {
		dst = append(dst, r.items[int((s-1)%uint64(cap(r.items)))])
	}
	return dst
}

// liveFeed holds the rings. mu is held only to copy in or out.
type liveFeed struct {
	mu     sync.Mutex
	points ring[livePoint]
	alerts ring[liveAlert]
	models ring[liveModel]
}

func newLiveFeed() *liveFeed {
	return &liveFeed{points: newRing[livePoint](livePointCap), alerts: newRing[liveAlert](liveAlertCap),
		models: newRing[liveModel](liveModelCap)}
}

// OfferBatch hands a batch whose outputs the broker acknowledged to the live view: up to
// livePointsPerBatch records, evenly spaced, for the chart, and every flagged record (flagged
// is their count, as the caller counted them; 0 skips the scan) for the alerts, up to
// liveAlertCap per batch. Called by the sink goroutine before the batch is released; it
// copies what it keeps and takes one short lock (BenchmarkOfferBatch: its cost against the
// batch's). A batch without scores (a builder's, or before the first model under
// before_model: pass) offers nothing.
func (m *Metrics) OfferBatch(b *batch.Batch, flagged int) {
	n := b.Len()
	if n == 0 || len(b.Scores) != n {
		return
	}
	at := m.now().UnixMilli()
	keys := b.Keys()
	keyAt := func(i int) string {
		if keys == nil || keys.IsNull(i) {
			return ""
		}
		return liveKey(keys.Value(i))
	}
	var sampled [livePointsPerBatch]livePoint
	ns := 0
	stride := max(1, n/livePointsPerBatch)
	for i := stride / 2; i < n && ns < livePointsPerBatch; i += stride {
		s := &b.Scores[i]
		if !s.Scored {
			continue
		}
		sampled[ns] = livePoint{at: at, key: keyAt(i), score: s.Score, threshold: s.Threshold, outlier: s.Outlier, suppressed: s.Suppressed}
		ns++
	}
	var alerts []liveAlert
	if flagged > 0 {
		alerts = make([]liveAlert, 0, min(flagged, liveAlertCap))
		skip := flagged - liveAlertCap // the ring keeps only the last liveAlertCap
		parts, offs := b.Partitions(), b.Offsets()
		d := len(b.Features)
		values := make([]float32, d*cap(alerts)) // one allocation for every alert's values
		var warming []*array.Float32             // per column, where it has a warming record (derive's mean, std)
		for j := range d {
			if a := b.Warming(j); a != nil {
				if warming == nil {
					warming = make([]*array.Float32, d)
				}
				warming[j] = a
			}
		}
		for i := range n {
			s := &b.Scores[i]
			if !s.Outlier {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			if len(alerts) == cap(alerts) { // flagged undercounted: keep what was sized for
				break
			}
			a := liveAlert{at: at, topic: b.Topic, partition: parts[i], offset: offs[i], key: keyAt(i),
				model: b.ModelVersion, features: b.Features, values: values[:d:d], score: *s}
			values = values[d:]
			for j := range d {
				a.values[j] = b.Feature(j)[i]
				if warming != nil && warming[j] != nil && warming[j].IsNull(i) { // (its partial window's value: named)
					a.warming = append(a.warming, b.Features[j])
				}
			}
			if t, ok := b.Time(i); ok {
				a.recordAt = t.UnixMilli()
			}
			alerts = append(alerts, a)
		}
	}
	f := m.live
	f.mu.Lock()
	for i := range ns {
		f.points.push(sampled[i], func(p *livePoint, seq uint64) { p.seq = seq })
	}
	for i := range alerts {
		f.alerts.push(alerts[i], func(a *liveAlert, seq uint64) { a.seq = seq })
	}
	f.mu.Unlock()
}

// liveKey is the key as the feed keeps it: whole up to liveKeyMax bytes, else its first whole
// runes within liveKeyMax bytes and "…".
func liveKey(k []byte) string {
	if len(k) <= liveKeyMax {
		return string(k)
	}
	cut := liveKeyMax
	for cut > 0 && !utf8.RuneStart(k[cut]) {
		cut--
	}
	return string(k[:cut]) + "…"
}

// modelChanged records info in the model history unless it is the last entry already (a
// retuned model keeps its version with new figures: the page shows the latest entry of each).
func (f *liveFeed) modelChanged(info ModelInfo, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.models.items) > 0 && f.models.items[int((f.models.next-2)%uint64(cap(f.models.items)))].info == info {
		return
	}
	f.models.push(liveModel{at: at.UnixMilli(), info: info}, func(v *liveModel, seq uint64) { v.seq = seq })
}

// liveSnapshot is what a reader copies out of the feed in one go.
type liveSnapshot struct {
	points []livePoint
	alerts []liveAlert
	models []liveModel
}

// read copies out everything after the given sequences.
func (f *liveFeed) read(points, alerts, models uint64) liveSnapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return liveSnapshot{points: f.points.since(nil, points), alerts: f.alerts.since(nil, alerts),
		models: f.models.since(nil, models)}
}
