package detect

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/outlierd/outlierd/internal/algo/density"
	"github.com/outlierd/outlierd/internal/algo/microcluster"
	"github.com/outlierd/outlierd/internal/algo/proclus"
	"github.com/outlierd/outlierd/internal/algo/solvingset"
	"github.com/outlierd/outlierd/internal/core/sealed"
)

// Snapshot file format, version 2 (integers and floats little-endian; version 1 is version 2
// without the members flag, and is still read):
//
//	offset  size  field
//	0       8     magic "\x89ODSN\r\n\x1a" (a high byte and CR LF, as PNG: text-mode mangling
//	              and the wrong kind of file are caught at once)
//	8       4     format version (uint32) = 2
//	12      8     payload length P (uint64)
//	20      P     payload:
//	                model version u64, built at (Unix ns) i64, build time (ns) i64,
//	                window records u64,
//	                build params: window u64, clusters u32, iterations u32, k u32, n u32,
//	                m u32, seed u64,
//	                dims u32, q u32, flags u32 (bit 0: anchors present; bit 1: members
//	                present, bit 2: PROCLUS subspaces present (version 2); bit 3: the
//	                ranking part follows the subspaces, snapshot_rank.go; bit 4: that part
//	                ends with the detectors' weights (score.weights); bit 5: its whitening
//	                follows; bit 6: the window's event-time span ends the payload,
//	                snapFlagSpan; others must be 0),
//	                dims x { name length u32, name UTF-8 },
//	                dims x offset f32, dims x scale f32,
//	                CF1, CF2, EF2: dims x q f64 each (column-major), N: q x i64,
//	                if anchors: dims x q f64,
//	                bandwidths: dims x f64,
//	                top weights: count u32, count x f64,
//	                solving set: length u64, then a solvingset model file (its own format,
//	                magic and checksum: solvingset.Model.Save),
//	                if members: topic (length u32, UTF-8), count u32,
//	                count x { partition u32, lo u64, hi u64 } (Members),
//	                if subspaces: k u32, k x { medoid row u64, radius f64, dims count u32,
//	                dims x u32 (ascending), center dims x f32 (all model dims) } (Subspaces)
//	20+P    32    SHA-256 of bytes [0, 20+P)
//
// The density model is not stored: density.NewModel(micro-clusters, bandwidths) rebuilds it
// deterministically, bit for bit.
const (
	snapshotMagic = "\x89ODSN\r\n\x1a"
	// SnapshotFormat is the newest snapshot format version this code reads and writes.
	SnapshotFormat     = 2
	snapFlagAnchors    = 1
	snapFlagMembers    = 2
	snapFlagSubspaces  = 4
	maxSnapshotDims    = 1 << 16
	maxSnapshotName    = 1 << 12
	maxSnapshotQ       = 1 << 24
	maxSnapshotPayload = 1 << 40
	// DefaultSnapshots is how many snapshots a SnapshotDir keeps unless told otherwise.
	DefaultSnapshots = 3
	snapshotPrefix   = "model-"
	snapshotExt      = ".osnap"
)

// snapshotFile is the envelope above (package sealed writes and checks it).
var snapshotFile = sealed.Format{Magic: snapshotMagic, Name: "outlierd model snapshot", Newest: SnapshotFormat, MaxPayload: maxSnapshotPayload}

// ErrSnapshotFormat is wrapped by every error of ReadSnapshot that concerns the content.
var ErrSnapshotFormat = errors.New("detect: bad snapshot")

// ErrSnapshotMismatch is wrapped when a valid snapshot does not fit the configuration.
var ErrSnapshotMismatch = errors.New("detect: snapshot does not fit the configuration")

// BuildParams are the configuration values that shape a model. A reload that changes one of
// them (N aside: see the w* policy in reconfigure.go) needs a rebuild; a snapshot built with
// other values is refused.
type BuildParams struct {
	Window, Clusters, Iterations, K, N, M int
	Seed                                  uint64
}

func buildParams(c Config) BuildParams {
	return BuildParams{Window: c.Window, Clusters: c.Density.Clusters, Iterations: c.Density.Iterations,
		K: c.Distance.K, N: c.Distance.N, M: c.Distance.M, Seed: c.Seed}
}

// rebuildDiff names the build parameters other than N where p and q differ ("k 50 -> 10").
func (p BuildParams) rebuildDiff(q BuildParams) []string {
	var d []string
	cmp := func(name string, a, b uint64) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %d -> %d", name, a, b))
		}
	}
	cmp("window", uint64(p.Window), uint64(q.Window))
	cmp("density.clusters", uint64(p.Clusters), uint64(q.Clusters))
	cmp("density.iterations", uint64(p.Iterations), uint64(q.Iterations))
	cmp("distance.k", uint64(p.K), uint64(q.K))
	cmp("distance.m", uint64(p.M), uint64(q.M))
	cmp("seed", p.Seed, q.Seed)
	return d
}

// Fits reports why m cannot serve a stream of features under cfg, or nil: the features must
// be the same names in the same order, the build parameters the same, and cfg's n one whose
// w* the model knows exactly (n <= len(TopWeights)).
func (m *Model) Fits(features []string, cfg Config) error {
	if !slices.Equal(m.Features, features) {
		return fmt.Errorf("%w: built for features [%s], the stream has [%s]", ErrSnapshotMismatch,
			strings.Join(m.Features, " "), strings.Join(features, " "))
	}
	if d := m.Params.rebuildDiff(buildParams(cfg)); len(d) > 0 {
		return fmt.Errorf("%w: built with other parameters (%s)", ErrSnapshotMismatch, strings.Join(d, ", "))
	}
	if err := rankerFits(m.Ranker, cfg); err != nil {
		return err
	}
	if n := cfg.Distance.N; EffectiveN(n, m.Params.Window, m.WindowRecords) > len(m.TopWeights) {
		return fmt.Errorf("%w: knows the top %d weights, distance.n = %d needs the window", ErrSnapshotMismatch, len(m.TopWeights), n)
	}
	return nil
}

// WithN returns m with w* of the top-n rule for another n, taken from its exact top weights
// (the same version, micro-clusters and solving set; m itself is unchanged). ok is false
// when n exceeds the weights the model knows: only the window can give that w*.
func (m *Model) WithN(n int) (_ *Model, ok bool) {
	eff := EffectiveN(n, m.Params.Window, m.WindowRecords)
	if n < 1 || eff > len(m.TopWeights) {
		return nil, false
	}
	if n == m.Params.N {
		return m, true
	}
	d := *m.Distance
	d.WStar = m.TopWeights[eff-1]
	c := *m
	c.Distance, c.Params.N = &d, n
	return &c, true
}

// WriteSnapshot writes m in the snapshot format above.
func WriteSnapshot(w io.Writer, m *Model) error {
	if m == nil || m.MicroClusters == nil || m.Density == nil || m.Distance == nil {
		return errors.New("detect: snapshot: incomplete model")
	}
	mc := m.MicroClusters
	dims, q := len(m.Features), mc.Q()
	if mc.Dims() != dims || len(m.Offset) != dims || len(m.Scale) != dims || len(m.Density.H) != dims {
		return fmt.Errorf("detect: snapshot: model shapes disagree (%d features, %d micro-cluster dims, %d offsets, %d scales, %d bandwidths)",
			dims, mc.Dims(), len(m.Offset), len(m.Scale), len(m.Density.H))
	}
	var ss bytes.Buffer
	if err := m.Distance.Save(&ss); err != nil {
		return fmt.Errorf("detect: snapshot: %w", err)
	}
	var e sealed.Encoder
	e.U64(m.Version)
	e.U64(uint64(m.BuiltAt.UnixNano()))
	e.U64(uint64(m.BuildTime))
	e.U64(uint64(m.WindowRecords))
	p := m.Params
	e.U64(uint64(p.Window))
	for _, v := range []int{p.Clusters, p.Iterations, p.K, p.N, p.M} {
		e.U32(uint32(v))
	}
	e.U64(p.Seed)
	var flags uint32
	if mc.Anchor != nil {
		flags |= snapFlagAnchors
	}
	if len(m.Members.Ranges) > 0 {
		flags |= snapFlagMembers
	}
	if m.Subspaces != nil {
		flags |= snapFlagSubspaces
	}
	if m.Ranker != nil {
		flags |= snapFlagRanker
		if !m.Ranker.beforeWeights {
			flags |= snapFlagWeights
		}
		if m.Ranker.Whiten != nil {
			flags |= snapFlagWhiten
		}
	}
	if m.WindowSpan >= time.Millisecond { // (whole milliseconds: windowRing.span)
		flags |= snapFlagSpan
	}
	e.U32(uint32(dims))
	e.U32(uint32(q))
	e.U32(flags)
	for _, f := range m.Features {
		e.Text(f)
	}
	e.F32s(m.Offset)
	e.F32s(m.Scale)
	for _, t := range [][][]float64{mc.CF1, mc.CF2, mc.EF2} {
		for j := range dims {
			e.F64s(t[j])
		}
	}
	for _, n := range mc.N {
		e.U64(uint64(n))
	}
	if mc.Anchor != nil {
		for j := range dims {
			e.F64s(mc.Anchor[j])
		}
	}
	e.F64s(m.Density.H)
	e.U32(uint32(len(m.TopWeights)))
	e.F64s(m.TopWeights)
	e.U64(uint64(ss.Len()))
	e.Raw(ss.Bytes())
	if len(m.Members.Ranges) > 0 {
		e.Text(m.Members.Topic)
		e.U32(uint32(len(m.Members.Ranges)))
		for _, r := range m.Members.Ranges {
			e.U32(uint32(r.Partition))
			e.U64(uint64(r.Lo))
			e.U64(uint64(r.Hi))
		}
	}
	if r := m.Subspaces; r != nil {
		e.U32(uint32(len(r.Centers)))
		for c := range r.Centers {
			e.U64(uint64(r.Medoids[c]))
			e.F64s([]float64{r.Radius[c]})
			e.U32(uint32(len(r.Dims[c])))
			for _, j := range r.Dims[c] {
				e.U32(uint32(j))
			}
			e.F32s(r.Centers[c])
		}
	}
	if m.Ranker != nil {
		encodeRanker(&e, m.Ranker, !m.Ranker.beforeWeights)
		if m.Ranker.Whiten != nil {
			encodeWhiten(&e, m.Ranker)
		}
	}
	if m.WindowSpan >= time.Millisecond { // (whole milliseconds: windowRing.span)
		e.U64(uint64(m.WindowSpan.Milliseconds()))
	}
	if err := snapshotFile.Write(w, SnapshotFormat, e.Payload()); err != nil {
		return fmt.Errorf("detect: snapshot: %w", err)
	}
	return nil
}

func snapErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSnapshotFormat, fmt.Sprintf(format, args...))
}

// sealedErr wraps an error of the sealed envelope or decoder: a refusal of the content with
// ErrSnapshotFormat, the reader's own error as it is.
func sealedErr(err error) error { return sealed.Wrap(err, ErrSnapshotFormat, "detect: snapshot") }

// ReadSnapshot reads a model written by WriteSnapshot. A file that is truncated, corrupt
// (checksum), of another kind (magic), of a newer format version, or inconsistent is refused
// with the reason; the error wraps ErrSnapshotFormat (or the reader's error).
func ReadSnapshot(r io.Reader) (*Model, error) {
	_, payload, err := snapshotFile.Read(r)
	if err != nil {
		return nil, sealedErr(err)
	}
	return decodeSnapshot(payload)
}

func decodeSnapshot(p []byte) (*Model, error) {
	d := sealed.NewDecoder(p)
	m := &Model{Version: d.U64("model version")}
	m.BuiltAt = time.Unix(0, int64(d.U64("build time"))).UTC()
	m.BuildTime = time.Duration(d.U64("build duration"))
	m.WindowRecords = int(d.U64("window records"))
	m.Params.Window = int(d.U64("window"))
	for _, f := range []*int{&m.Params.Clusters, &m.Params.Iterations, &m.Params.K, &m.Params.N, &m.Params.M} {
		*f = int(d.U32("build parameters"))
	}
	m.Params.Seed = d.U64("seed")
	dims, q, flags := int(d.U32("dims")), int(d.U32("q")), d.U32("flags")
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	if dims < 1 || dims > maxSnapshotDims {
		return nil, snapErr("dims %d out of range [1, %d]", dims, maxSnapshotDims)
	}
	if q < 1 || q > maxSnapshotQ {
		return nil, snapErr("q %d out of range [1, %d]", q, maxSnapshotQ)
	}
	if flags&^(snapFlagAnchors|snapFlagMembers|snapFlagSubspaces|snapFlagRanker|snapFlagWeights|snapFlagWhiten|snapFlagSpan) != 0 {
		return nil, snapErr("unknown flags %#x", flags)
	}
	if flags&snapFlagWhiten != 0 && flags&snapFlagRanker == 0 {
		return nil, snapErr("flags %#x: a whitening without the ranking part it belongs to", flags)
	}
	// The tuples alone take 8*q*(3*dims+1) bytes: a header the payload cannot hold is refused
	// before any allocation.
	if need := 8 * uint64(q) * (3*uint64(dims) + 1); need > uint64(len(p)) {
		return nil, snapErr("%d micro-clusters in %d dims cannot fit in a payload of %d bytes", q, dims, len(p))
	}
	m.Features = make([]string, dims)
	for j := range m.Features {
		m.Features[j] = d.Text(maxSnapshotName, fmt.Sprintf("feature %d name", j))
	}
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	m.Offset = d.F32s(uint64(dims), "offsets")
	m.Scale = d.F32s(uint64(dims), "scales")
	mc := &microcluster.MicroClusters{CF1: make([][]float64, dims), CF2: make([][]float64, dims), EF2: make([][]float64, dims), N: make([]int64, q)}
	for _, t := range [][][]float64{mc.CF1, mc.CF2, mc.EF2} {
		for j := range dims {
			t[j] = d.F64s(uint64(q), "micro-cluster sums")
		}
	}
	for c := range mc.N {
		mc.N[c] = int64(d.U64("micro-cluster counts"))
	}
	if flags&snapFlagAnchors != 0 {
		mc.Anchor = make([][]float64, dims)
		for j := range dims {
			mc.Anchor[j] = d.F64s(uint64(q), "anchors")
		}
	}
	h := d.F64s(uint64(dims), "bandwidths")
	nTop := d.U32("top weight count")
	if d.Err() == nil && uint64(nTop) > uint64(d.Left())/8 {
		return nil, snapErr("%d top weights cannot fit in the %d bytes left", nTop, d.Left())
	}
	m.TopWeights = d.F64s(uint64(nTop), "top weights")
	sslen := d.U64("solving-set length")
	ssb := d.Take(sslen, "solving set")
	if flags&snapFlagMembers != 0 {
		m.Members.Topic = d.Text(maxSnapshotName, "members' topic")
		nr := d.U32("member range count")
		if d.Err() == nil && uint64(nr) > uint64(d.Left())/20 {
			return nil, snapErr("%d member ranges cannot fit in the %d bytes left", nr, d.Left())
		}
		for i := uint32(0); i < nr && d.Err() == nil; i++ {
			r := PartitionRange{Partition: int32(d.U32("partition")), Lo: int64(d.U64("lo")), Hi: int64(d.U64("hi"))}
			if i > 0 && r.Partition <= m.Members.Ranges[i-1].Partition || r.Lo > r.Hi {
				return nil, snapErr("member range %d (%+v) out of order or empty", i, r)
			}
			m.Members.Ranges = append(m.Members.Ranges, r)
		}
	}
	if flags&snapFlagSubspaces != 0 {
		sub, err := decodeSubspaces(d, dims)
		if err != nil {
			return nil, err
		}
		m.Subspaces = sub
	}
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	if flags&snapFlagRanker != 0 {
		var err error
		if m.Ranker, err = decodeRanker(d, m.Features, flags&snapFlagWeights != 0); err != nil {
			return nil, err
		}
		if flags&snapFlagWhiten != 0 {
			if err = decodeWhiten(d, m.Ranker, len(m.Features)); err != nil {
				return nil, err
			}
		}
	}
	if flags&snapFlagSpan != 0 {
		ms := d.U64("window span")
		if d.Err() == nil && (ms == 0 || ms > math.MaxInt64/uint64(time.Millisecond)) {
			return nil, snapErr("window span of %d ms out of range", ms)
		}
		m.WindowSpan = time.Duration(ms) * time.Millisecond
	}
	if d.Left() != 0 {
		return nil, snapErr("%d unread bytes at the end of the payload", d.Left())
	}
	if err := checkSnapshotValues(m, mc); err != nil {
		return nil, err
	}
	var err error
	if m.Distance, err = solvingset.Load(bytes.NewReader(ssb)); err != nil {
		return nil, fmt.Errorf("%w: solving set: %w", ErrSnapshotFormat, err)
	}
	if !slices.Equal(m.Distance.Features, m.Features) {
		return nil, snapErr("the solving set's features [%s] differ from the model's [%s]",
			strings.Join(m.Distance.Features, " "), strings.Join(m.Features, " "))
	}
	m.MicroClusters = mc
	if m.Density, err = density.NewModel(mc, h); err != nil {
		return nil, fmt.Errorf("%w: density model: %w", ErrSnapshotFormat, err)
	}
	return m, nil
}

// checkSnapshotValues refuses values no build produces: they would score nonsense silently.
func checkSnapshotValues(m *Model, mc *microcluster.MicroClusters) error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for j := range m.Offset {
		if !finite(float64(m.Offset[j])) || !finite(float64(m.Scale[j])) || m.Scale[j] <= 0 {
			return snapErr("normalisation of feature %d is offset %v, scale %v", j, m.Offset[j], m.Scale[j])
		}
	}
	var total int64
	for c, n := range mc.N {
		if n < 0 {
			return snapErr("micro-cluster %d has %d members", c, n)
		}
		total += n
	}
	if total < 1 {
		return snapErr("the micro-clusters summarise no records")
	}
	for _, t := range [][][]float64{mc.CF1, mc.CF2, mc.EF2, mc.Anchor} {
		for _, col := range t {
			for _, v := range col {
				if !finite(v) {
					return snapErr("a micro-cluster value is %v", v)
				}
			}
		}
	}
	for i, w := range m.TopWeights {
		if !finite(w) || w < 0 || (i > 0 && w > m.TopWeights[i-1]) {
			return snapErr("top weights must be finite, >= 0 and descending (index %d is %v)", i, w)
		}
	}
	p := m.Params
	if m.WindowRecords < 2 || p.Window < 1 || p.Clusters < 1 || p.Iterations < 1 || p.K < 1 || p.N < 1 || p.M < 1 {
		return snapErr("build parameters out of range: %+v", p)
	}
	return nil // bandwidths are checked by density.NewModel
}

// decodeSubspaces reads the PROCLUS clusters of a snapshot (the fields Nearest needs).
func decodeSubspaces(d *sealed.Decoder, dims int) (*proclus.Result, error) {
	k := d.U32("cluster count")
	if d.Err() == nil && (k < 1 || uint64(k) > uint64(d.Left())/(16+4*uint64(dims))) {
		return nil, snapErr("%d PROCLUS clusters cannot fit in the %d bytes left", k, d.Left())
	}
	r := &proclus.Result{}
	for c := uint32(0); c < k && d.Err() == nil; c++ {
		r.Medoids = append(r.Medoids, int(d.U64("medoid")))
		r.Radius = append(r.Radius, d.F64s(1, "radius")...)
		nd := d.U32("subspace size")
		if d.Err() == nil && (nd < 1 || int(nd) > dims) {
			return nil, snapErr("cluster %d has a subspace of %d of %d dimensions", c, nd, dims)
		}
		sub := make([]int, 0, nd)
		for i := uint32(0); i < nd && d.Err() == nil; i++ {
			j := int(d.U32("subspace dimension"))
			if j >= dims || (len(sub) > 0 && j <= sub[len(sub)-1]) {
				return nil, snapErr("cluster %d: subspace dimension %d out of range or order", c, j)
			}
			sub = append(sub, j)
		}
		r.Dims = append(r.Dims, sub)
		r.Centers = append(r.Centers, d.F32s(uint64(dims), "cluster center"))
	}
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	return r, nil
}
