package checkpoint

import (
	"errors"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
)

// op is one step of a table-driven scenario.
type op struct {
	kind      string // "reg", "done", "revoke"
	partition int
	offset    int64
	wantOK    bool // for "done": the expected return value
	wantErr   error
}

func TestCheckpointerScenarios(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ops  []op
		want map[int]int64
	}{
		{
			name: "nothing done",
			ops:  []op{{kind: "reg", offset: 0}, {kind: "reg", offset: 1}},
			want: map[int]int64{},
		},
		{
			name: "in order",
			ops: []op{
				{kind: "reg", offset: 0}, {kind: "reg", offset: 1}, {kind: "reg", offset: 2},
				{kind: "done", offset: 0, wantOK: true}, {kind: "done", offset: 1, wantOK: true},
			},
			want: map[int]int64{0: 2},
		},
		{
			name: "out of order holds back at the first unfinished record",
			ops: []op{
				{kind: "reg", offset: 10}, {kind: "reg", offset: 11}, {kind: "reg", offset: 12},
				{kind: "done", offset: 12, wantOK: true}, {kind: "done", offset: 11, wantOK: true},
			},
			want: map[int]int64{},
		},
		{
			name: "out of order then the gap closes",
			ops: []op{
				{kind: "reg", offset: 10}, {kind: "reg", offset: 11}, {kind: "reg", offset: 12},
				{kind: "done", offset: 12, wantOK: true}, {kind: "done", offset: 10, wantOK: true},
				{kind: "done", offset: 11, wantOK: true},
			},
			want: map[int]int64{0: 13},
		},
		{
			name: "offset gaps from compaction commit past the last done record",
			ops: []op{
				{kind: "reg", offset: 3}, {kind: "reg", offset: 7}, {kind: "reg", offset: 20},
				{kind: "done", offset: 3, wantOK: true}, {kind: "done", offset: 7, wantOK: true},
			},
			want: map[int]int64{0: 8},
		},
		{
			name: "partitions are independent",
			ops: []op{
				{kind: "reg", partition: 0, offset: 0}, {kind: "reg", partition: 1, offset: 0},
				{kind: "reg", partition: 1, offset: 1}, {kind: "reg", partition: 2, offset: 5},
				{kind: "done", partition: 1, offset: 1, wantOK: true},
				{kind: "done", partition: 1, offset: 0, wantOK: true},
				{kind: "done", partition: 2, offset: 5, wantOK: true},
			},
			want: map[int]int64{1: 2, 2: 6},
		},
		{
			name: "double, unknown and unregistered acks are ignored",
			ops: []op{
				{kind: "reg", offset: 0}, {kind: "reg", offset: 2},
				{kind: "done", offset: 0, wantOK: true}, {kind: "done", offset: 0, wantOK: false},
				{kind: "done", offset: 1, wantOK: false}, {kind: "done", offset: 9, wantOK: false},
				{kind: "done", partition: 4, offset: 0, wantOK: false},
			},
			want: map[int]int64{0: 1},
		},
		{
			name: "regression is refused and changes nothing",
			ops: []op{
				{kind: "reg", offset: 5}, {kind: "reg", offset: 5, wantErr: ErrOffsetRegression},
				{kind: "reg", offset: 4, wantErr: ErrOffsetRegression},
				{kind: "done", offset: 5, wantOK: true},
			},
			want: map[int]int64{0: 6},
		},
		{
			name: "revoked partition: acks ignored, state dropped",
			ops: []op{
				{kind: "reg", offset: 0}, {kind: "reg", offset: 1}, {kind: "reg", partition: 1, offset: 0},
				{kind: "done", offset: 0, wantOK: true},
				{kind: "revoke"},
				{kind: "done", offset: 1, wantOK: false},
				{kind: "done", partition: 1, offset: 0, wantOK: true},
			},
			want: map[int]int64{1: 1},
		},
		{
			name: "reassigned after revocation restarts from the committed offset",
			ops: []op{
				{kind: "reg", offset: 0}, {kind: "reg", offset: 1}, {kind: "reg", offset: 2},
				{kind: "done", offset: 0, wantOK: true},
				{kind: "revoke"},
				{kind: "reg", offset: 1}, {kind: "reg", offset: 2},
				{kind: "done", offset: 2, wantOK: true},
			},
			want: map[int]int64{},
		},
		{
			name: "negative coordinates are refused",
			ops: []op{
				{kind: "reg", offset: -1, wantErr: errAny},
				{kind: "reg", partition: -1, offset: 0, wantErr: errAny},
			},
			want: map[int]int64{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := New()
			for i, o := range tc.ops {
				switch o.kind {
				case "reg":
					err := c.Register(o.partition, o.offset)
					switch {
					case o.wantErr == nil && err != nil:
						t.Fatalf("op %d: Register(%d, %d) = %v", i, o.partition, o.offset, err)
					case o.wantErr == errAny && err == nil:
						t.Fatalf("op %d: Register(%d, %d) = nil, want an error", i, o.partition, o.offset)
					case o.wantErr != nil && o.wantErr != errAny && !errors.Is(err, o.wantErr):
						t.Fatalf("op %d: Register(%d, %d) = %v, want %v", i, o.partition, o.offset, err, o.wantErr)
					}
				case "done":
					if got := c.Done(o.partition, o.offset); got != o.wantOK {
						t.Fatalf("op %d: Done(%d, %d) = %v, want %v", i, o.partition, o.offset, got, o.wantOK)
					}
				case "revoke":
					c.Revoke(o.partition)
				}
			}
			if got := c.Committable(); !maps.Equal(got, tc.want) {
				t.Fatalf("Committable() = %v, want %v", got, tc.want)
			}
		})
	}
}

// errAny marks an op that must fail without a specific sentinel.
var errAny = errors.New("any error")

// model is the obviously-correct reference: every registered record with a done flag, never
// dropped. committable(p) = 1 + the largest registered offset o such that every registered
// offset <= o is done.
type model struct {
	recs map[int][]modelRec
}

type modelRec struct {
	offset int64
	done   bool
}

func (m *model) committable() map[int]int64 {
	out := map[int]int64{}
	for p, rs := range m.recs {
		for _, r := range rs {
			if !r.done {
				break
			}
			out[p] = r.offset + 1
		}
	}
	return out
}

// TestCheckpointerRandomAcks registers records with random gaps on several partitions, acks them
// in random order with random revocations, and after every step compares Committable with the
// reference model. In particular it can never report an offset past an unfinished record.
func TestCheckpointerRandomAcks(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		c := New()
		m := &model{recs: map[int][]modelRec{}}
		const parts = 4
		next := [parts]int64{}
		type rec struct {
			p   int
			off int64
		}
		var inflight []rec // every registered record not yet acked (including revoked ones)
		revoked := map[rec]bool{}
		for step := 0; step < 400; step++ {
			switch r := rng.IntN(100); {
			case r < 45: // register a record
				p := rng.IntN(parts)
				next[p] += 1 + int64(rng.IntN(3)) // gaps as after compaction
				if err := c.Register(p, next[p]); err != nil {
					t.Fatalf("seed %d: Register: %v", seed, err)
				}
				m.recs[p] = append(m.recs[p], modelRec{offset: next[p]})
				inflight = append(inflight, rec{p, next[p]})
			case r < 97 && len(inflight) > 0: // ack a random in-flight record
				i := rng.IntN(len(inflight))
				x := inflight[i]
				inflight[i] = inflight[len(inflight)-1]
				inflight = inflight[:len(inflight)-1]
				want := !revoked[x]
				if got := c.Done(x.p, x.off); got != want {
					t.Fatalf("seed %d step %d: Done(%d, %d) = %v, want %v", seed, step, x.p, x.off, got, want)
				}
				if want {
					rs := m.recs[x.p]
					for j := range rs {
						if rs[j].offset == x.off {
							rs[j].done = true
						}
					}
				}
			default: // a rebalance takes a partition away
				p := rng.IntN(parts)
				c.Revoke(p)
				for _, x := range inflight {
					if x.p == p {
						revoked[x] = true
					}
				}
				delete(m.recs, p)
			}
			got := c.Committable()
			if want := m.committable(); !maps.Equal(got, want) {
				t.Fatalf("seed %d step %d: Committable() = %v, want %v", seed, step, got, want)
			}
			// The safety property stated directly: no commit past an unfinished record.
			for _, x := range inflight {
				if !revoked[x] && got[x.p] > x.off {
					t.Fatalf("seed %d step %d: partition %d commit %d passes unfinished offset %d",
						seed, step, x.p, got[x.p], x.off)
				}
			}
		}
	}
}

// TestCheckpointerConcurrent registers from one goroutine and acks from several, as the source
// and the sinks do, and checks the end state (run with -race to check the locking).
func TestCheckpointerConcurrent(t *testing.T) {
	t.Parallel()
	c := New()
	const n, parts, ackers = 3000, 3, 4
	work := make(chan [2]int64, 64)
	var wg sync.WaitGroup
	for range ackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range work {
				if !c.Done(int(w[0]), w[1]) {
					t.Errorf("Done(%d, %d) ignored", w[0], w[1])
				}
			}
		}()
	}
	for i := range int64(n) {
		p := int(i % parts)
		if err := c.Register(p, i); err != nil {
			t.Fatal(err)
		}
		work <- [2]int64{int64(p), i}
	}
	close(work)
	wg.Wait()
	want := map[int]int64{0: n - 2, 1: n - 1, 2: n}
	if got := c.Committable(); !maps.Equal(got, want) {
		t.Fatalf("Committable() = %v, want %v", got, want)
	}
	for p := range parts {
		if got := c.Pending(p); got != 0 {
			t.Fatalf("Pending(%d) = %d, want 0", p, got)
		}
	}
}

func BenchmarkCheckpointerInOrder(b *testing.B) {
	c := New()
	for i := range int64(b.N) {
		if err := c.Register(0, i); err != nil {
			b.Fatal(err)
		}
		if i >= 1000 { // keep 1000 in flight, acked oldest first
			c.Done(0, i-1000)
		}
	}
}
