package detect

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// BenchmarkWindowState: the window's save and load (window_state.go) at the default window
// (50,000 records of the sensor stream's 8 features with their uncertainties) and at 1,000,000
// records of 20 features: copy (on the stage's goroutine, at a save), encode, digest (the
// payload hashed: keyed_unchanged.go), save (digest, encode, write, fsync, rename, directory
// fsync: the save's goroutine, or the stop's), unchanged (a stop's save that finds the window as
// the newest file holds it: copy and digest), periodic (copy and save; its B/op is what the save
// allocates), load (read, checksum, decode, put back: the start). docs/BENCHMARKS.md §13.2.10,
// §13.2.11.
//
//	go test ./stages/detect/ -run '^$' -bench BenchmarkWindowState -benchtime 5x
func BenchmarkWindowState(b *testing.B) {
	for _, sh := range []struct {
		records, dims int
		withSD        bool
	}{{50_000, 8, true}, {1_000_000, 20, false}} {
		name := fmt.Sprintf("%dx%d", sh.records, sh.dims)
		if sh.withSD {
			name += "+sd"
		}
		b.Run(name, func(b *testing.B) {
			s, dir := fullWindowStage(b, sh.records, sh.dims, sh.withSD)
			defer s.Close()
			defer s.PassedOnDropped() // (its Close saves nothing)
			w := s.windowCopy()
			b.Run("copy", func(b *testing.B) {
				for b.Loop() {
					s.windowCopy()
				}
			})
			b.Run("encode", func(b *testing.B) {
				for b.Loop() {
					if err := writeWindowPayload(context.Background(), io.Discard, w); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("digest", func(b *testing.B) { // (what a save that finds the window unchanged costs after the copy)
				for b.Loop() {
					if _, err := windowDigest(context.Background(), s.ext.seed, w); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("save", func(b *testing.B) {
				for b.Loop() {
					s.ext.saved.set(&s.ext.saved.window, 0, "") // (each op a whole save: the window is the one saved before)
					s.writeWindow(context.Background(), s.ext.snaps, w, false)
				}
				b.ReportMetric(float64(w.payloadLen()+sealed.HeaderSize+sealed.SumSize), "file_bytes")
			})
			b.Run("unchanged", func(b *testing.B) { // (a stop that finds the window as the newest file holds it: the copy and the digest, nothing written)
				s.ext.saved.set(&s.ext.saved.window, 0, "")
				s.writeWindow(context.Background(), s.ext.snaps, w, false)
				files := len(windowFiles(b, s))
				for b.Loop() {
					s.writeWindow(context.Background(), s.ext.snaps, s.windowCopy(), true)
				}
				if n := len(windowFiles(b, s)); n != files {
					b.Fatalf("%d window files after the unchanged saves, want %d", n, files)
				}
			})
			b.Run("periodic", func(b *testing.B) { // (a periodic save's copy and write: its B/op is what it allocates, held as it writes)
				b.ReportAllocs()
				for b.Loop() {
					s.ext.saved.set(&s.ext.saved.window, 0, "")
					s.writeWindow(context.Background(), s.ext.snaps, s.windowCopy(), false)
				}
			})
			b.Run("load", func(b *testing.B) {
				cfg := s.cfg
				for b.Loop() {
					r, err := NewStage(cfg, s.features, s.withSD, Deps{Log: zerolog.Nop()})
					if err != nil {
						b.Fatal(err)
					}
					if r.win.Len() != sh.records {
						b.Fatalf("%d records loaded, want %d", r.win.Len(), sh.records)
					}
					r.PassedOnDropped() // (its Close saves nothing)
					r.Close()
				}
			})
			_ = os.RemoveAll(dir)
		})
	}
}

// fullWindowStage is a stage (state_dir a new directory) whose window holds records records of
// dims standard normal features (and uncertainties), a tenth of them warming and a hundredth
// significant, from three partitions.
func fullWindowStage(b testing.TB, records, dims int, withSD bool) (*Stage, string) {
	b.Helper()
	cfg := Default()
	cfg.Window, cfg.MinRecords = records, records
	dir, err := os.MkdirTemp("", "winbench")
	if err != nil {
		b.Fatal(err)
	}
	cfg.StateDir = dir
	features := make([]string, dims)
	for j := range features {
		features[j] = fmt.Sprintf("f%02d", j)
	}
	s, err := NewStage(cfg, features, withSD, Deps{Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(13, 2))
	cols := make([][]float32, dims)
	var sds [][]float32
	for j := range cols {
		cols[j] = make([]float32, records)
		for i := range cols[j] {
			cols[j][i] = float32(rng.NormFloat64())
		}
	}
	if withSD {
		sds = make([][]float32, dims)
		for j := range sds {
			sds[j] = make([]float32, records)
			for i := range sds[j] {
				sds[j][i] = 0.1
			}
		}
	}
	if err := s.win.Push(cols, sds, nil); err != nil {
		b.Fatal(err)
	}
	parts, offs, warm := make([]int32, records), make([]int64, records), make([]bool, records)
	for i := range parts {
		parts[i], offs[i], warm[i] = int32(i%3), int64(i/3), i%10 == 0
	}
	first := s.recs.push("bench", parts, offs, warm, nil)
	for i := 0; i < records; i += 100 {
		s.recs.setSignificant(first + uint64(i))
	}
	return s, dir
}
