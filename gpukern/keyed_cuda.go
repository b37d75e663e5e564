//go:build cuda

package gpukern

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

// KeyedStore keeps keys' ranking models resident on one device, a slot of Shape.SlotBytes() each
// (keyed.cu's layout): the caller owns the slot numbers (a key's slot for as long as the key is
// warm) and installs a key's model in its slot whenever the model is rebuilt. Methods are safe for
// concurrent use (serialised by the device's do).
type KeyedStore struct {
	dev   *Device
	shape KeyedShape
	// staged is Install's host staging of the models, kept from call to call: a batch's rebuilt
	// keys are megabytes, whose fresh memory each call cost more than their encoding.
	stageMu sync.Mutex
	staged  []byte
	// Inside the device's do only.
	ptr   cu.DevicePtr // capacity slots
	slots int
	logs  cu.DevicePtr
	maxK  int
}

// NewKeyedStore makes an empty store for models of shape s on d.
func (d *Device) NewKeyedStore(s KeyedShape) (*KeyedStore, error) {
	if why := s.Check(); why != "" {
		return nil, fmt.Errorf("gpukern.NewKeyedStore: %s", why)
	}
	st := &KeyedStore{dev: d, shape: s}
	err := d.do(func() (err error) {
		st.logs, err = upload(d, "keyed logarithms", KeyedLogs(s.Window))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gpukern.NewKeyedStore: %w", err)
	}
	return st, nil
}

// Shape is the store's slot shape.
func (s *KeyedStore) Shape() KeyedShape { return s.shape }

// Bytes is the device memory the store holds: its slots (allocated capacity) and the logarithms.
func (s *KeyedStore) Bytes() int64 {
	var b int64
	_ = s.dev.do(func() error {
		b = int64(s.slots)*int64(s.shape.SlotBytes()) + int64(s.shape.Window+1)*8
		return nil
	})
	return b
}

// grow makes room for slot index top (capacity doubles, the old slots copied on the device).
// Inside do only.
func (s *KeyedStore) grow(top int) error {
	if top < s.slots {
		return nil
	}
	n := max(top+1, 2*s.slots, 1024)
	sb := int64(s.shape.SlotBytes())
	p, err := alloc("keyed slots", int64(n)*sb)
	if err != nil {
		return err
	}
	if s.ptr != 0 {
		if err := cu.MemcpyDtoD(p, s.ptr, int64(s.slots)*sb); err != nil {
			return errors.Join(fmt.Errorf("cuMemcpyDtoD(keyed slots): %w", err), frees(p))
		}
		if err := frees(s.ptr); err != nil {
			return errors.Join(err, frees(p))
		}
	}
	s.ptr, s.slots = p, n
	return nil
}

// Install puts models[i] into slot slots[i] (replacing what was there) with one upload and one
// launch: the pipeline installs every model its batch rebuilt at once.
func (s *KeyedStore) Install(slots []int32, models []*KeyedModel) error {
	if len(slots) != len(models) {
		return fmt.Errorf("gpukern.KeyedStore.Install: %d slots, %d models", len(slots), len(models))
	}
	if len(slots) == 0 {
		return nil
	}
	sb := s.shape.SlotBytes()
	s.stageMu.Lock() // (the staging buffer is the store's: one Install stages at a time)
	defer s.stageMu.Unlock()
	if cap(s.staged) < len(models)*sb {
		s.staged = make([]byte, len(models)*sb)
	}
	staged := s.staged[:len(models)*sb] // (each slot cleared by its encode)
	top, maxK := 0, 0
	for i, m := range models {
		if err := m.check(s.shape); err != nil {
			return fmt.Errorf("gpukern.KeyedStore.Install: slot %d: %w", slots[i], err)
		}
		if slots[i] < 0 {
			return fmt.Errorf("gpukern.KeyedStore.Install: slot %d", slots[i])
		}
		top, maxK = max(top, int(slots[i])), max(maxK, m.K)
	}
	encodeModels(s.shape, models, staged)
	d := s.dev
	err := d.do(func() error {
		if err := s.grow(top); err != nil {
			return err
		}
		var pk pack
		pk.reset(d.packBuf)
		defer func() { d.packBuf = pk.buf[:0] }()
		at := pk.add(unsafe.Pointer(&staged[0]), int64(len(staged)))
		slotAt := pk.add(unsafe.Pointer(&slots[0]), int64(len(slots))*4)
		base, err := pk.upload(d, scratchIn, "keyed models")
		if err != nil {
			return err
		}
		s.maxK = max(s.maxK, maxK)
		p := keyedInstallParams{Staged: uint64(base) + uint64(at), Slot: uint64(base) + uint64(slotAt),
			Count: int64(len(slots)), SlotBytes: int64(sb), Slots: uint64(s.ptr)}
		return launchParams(d, "keyed_install", [3]int{len(slots), 1, 1}, [3]int{128, 1, 1}, 0, &p)
	})
	if err != nil {
		return fmt.Errorf("gpukern.KeyedStore.Install: %w", err)
	}
	return nil
}

// ScoreGrouped scores records laid out by KeyedGroupers at consecutive firsts (xs: Dims values a
// record, row-major, finite; chunks: the parts' (slot, position, count) triples, in order, each
// position in one) against the models in their slots, in one launch, into out by position. Every
// slot named must hold a model.
func (s *KeyedStore) ScoreGrouped(chunks [][]int32, xs []float32, out *KeyedScores) error {
	dims := s.shape.Dims
	n := len(xs) / dims
	if len(xs)%dims != 0 || n == 0 {
		return fmt.Errorf("gpukern.KeyedStore.ScoreGrouped: %d values of %d features", len(xs), dims)
	}
	out.resize(n)
	back := out.back
	d := s.dev
	err := d.do(func() error {
		nchunk, err := checkChunks(chunks, n, s.slots)
		if err != nil {
			return err
		}
		var pk pack
		pk.reset(d.packBuf)
		defer func() { d.packBuf = pk.buf[:0] }()
		chAt := pk.add(nil, 0)
		for _, c := range chunks { // (triples of int32: contiguous without padding)
			if len(c) > 0 {
				pk.raw(unsafe.Pointer(&c[0]), int64(len(c))*4)
			}
		}
		xAt := pk.add(unsafe.Pointer(&xs[0]), int64(len(xs))*4)
		base, err := pk.upload(d, scratchIn, "keyed records")
		if err != nil {
			return err
		}
		dev, err := d.scratch(scratchOut, "keyed scores", int64(len(back))*8)
		if err != nil {
			return err
		}
		kernel := "keyed_score_q32"
		if s.maxK > 32 {
			kernel = "keyed_score_q64"
		}
		p := keyedScoreParams{Slots: uint64(s.ptr), SlotBytes: int64(s.shape.SlotBytes()), D: int64(dims),
			W: int64(s.shape.Window), Logs: uint64(s.logs), Chunks: uint64(base) + uint64(chAt), NChunk: int64(nchunk),
			X: uint64(base) + uint64(xAt), N: int64(n), Tail: uint64(dev), Dist: uint64(dev) + uint64(8*n),
			Host: uint64(dev) + uint64(16*n)}
		grid := (nchunk + keyedBlock/32 - 1) / (keyedBlock / 32)
		if err := launchParams(d, kernel, [3]int{grid, 1, 1}, [3]int{keyedBlock, 1, 1}, 0, &p); err != nil {
			return err
		}
		return download(d, "keyed scores", back, dev)
	})
	if err != nil {
		return fmt.Errorf("gpukern.KeyedStore.ScoreGrouped: %w", err)
	}
	return nil
}

// Free returns the store's device memory; a second call does nothing.
func (s *KeyedStore) Free() error {
	err := s.dev.do(func() error {
		err := frees(s.ptr, s.logs)
		s.ptr, s.logs, s.slots = 0, 0, 0
		return err
	})
	if err != nil {
		return fmt.Errorf("gpukern.KeyedStore.Free: %w", err)
	}
	return nil
}

// encodeGrain is the fewest models a goroutine of encodeModels encodes (about 5 KB each at 3
// features: a batch's rebuilt keys are hundreds, megabytes to stage).
const encodeGrain = 64

// encodeModels encodes models[i] into staged's i-th slot (shape's SlotBytes each), on every core
// for many.
func encodeModels(shape KeyedShape, models []*KeyedModel, staged []byte) {
	sb := shape.SlotBytes()
	workers := max(1, min(runtime.GOMAXPROCS(0), len(models)/encodeGrain))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * len(models) / workers; i < (w+1)*len(models)/workers; i++ {
				models[i].encode(shape, staged[i*sb:(i+1)*sb])
			}
		}()
	}
	wg.Wait()
}
