package detect

import (
	"math"
	"slices"

	"github.com/outlierd/outlierd/internal/core/sealed"
)

// The fleet's pool in the saved state (keys.tail: fleet): in the keys' state file (format 4) of a
// builder or a stage of both roles, in the alarm state file (format 2) of a scorer, which keeps
// no keys' state but fits its own pool (keyed_fleet.go). Saved whole, so that the verdicts after
// a restart are the uninterrupted run's (TestRestartContinuesFleetTail); before, the keys scored
// by their own tails after a restart until their shards held fleetReady again.
//
//	fleet pool: shards u32 (0: empty, as under keys.tail: own; else fleetShards),
//	            shards x { next u32, size u32, fresh u32, lo f32, hi f32,
//	                       size x f32 (the ring's first size values, in the ring's order) }
//
// 4 bytes when empty; full, 4 + 16 x (20 + 4 x 2,048) = 131,396 bytes. A shard's fit (lo, hi)
// is saved (it was made from the values of its last refit, fresh values ago); the fleet's is
// the median of the shards' fits (fitFleet), so it is not. The last pass's deviations, pooled
// at the next pass's start, are pooled into the copy that is saved (fleetCopy): the next pass
// after the restart starts from the pool the uninterrupted run's starts from.
const fleetShardHeader = 20

// fleetCopy is a copy of f for a save (the next pass changes it), the last pass's deviations
// pooled and the shards refitted where due, as the next pass's start does (fold); nil when
// nothing was pooled (keys.tail: own throughout).
func (f *fleetTail) fleetCopy() *fleetTail {
	c := &fleetTail{lo: f.lo, hi: f.hi, ok: f.ok, obs: f.obs, shard: f.shard}
	for s := range f.shards {
		c.shards[s] = f.shards[s]
		c.shards[s].ring = slices.Clone(f.shards[s].ring)
	}
	c.fold() // (reads obs, writes only the copy's rings and fit)
	for s := range c.shards {
		if c.shards[s].size > 0 {
			return c
		}
	}
	return nil
}

// encodeFleet writes the pool f (nil: empty) in the format above.
func encodeFleet(e *sealed.Encoder, f *fleetTail) {
	if f == nil {
		e.U32(0)
		return
	}
	e.U32(fleetShards)
	for s := range f.shards {
		sh := &f.shards[s]
		e.U32(uint32(sh.next))
		e.U32(uint32(sh.size))
		e.U32(uint32(sh.fresh))
		e.U32(math.Float32bits(sh.lo))
		e.U32(math.Float32bits(sh.hi))
		e.F32s(sh.ring[:sh.size])
	}
}

// decodeFleet reads a pool written by encodeFleet (nil: empty), refusing one that the pool
// cannot have come to: a shard's ring position, size or count since its fit out of their
// bounds, a deviation that is not one (NaN, negative, over fleetMaxDeviation), a fit of a
// shard not fitted yet or not ordered.
func decodeFleet(d *sealed.Decoder) (*fleetTail, error) {
	n := d.U32("fleet shards")
	if d.Err() != nil {
		return nil, sealedErr(d.Err())
	}
	if n == 0 {
		return nil, nil
	}
	if n != fleetShards {
		return nil, snapErr("the fleet's pool has %d shards, want %d", n, fleetShards)
	}
	f := &fleetTail{}
	for s := range f.shards {
		next, size, fresh := d.U32("shard position"), d.U32("shard size"), d.U32("shard fresh")
		lo, hi := math.Float32frombits(d.U32("shard lo")), math.Float32frombits(d.U32("shard hi"))
		if d.Err() != nil {
			return nil, sealedErr(d.Err())
		}
		ok := size >= fleetReady // (a shard is fitted once it holds fleetReady, and from then on)
		switch {
		case size > fleetPool || next >= fleetPool || (size < fleetPool && next != size):
			return nil, snapErr("fleet shard %d at %d, holding %d of %d", s, next, size, fleetPool)
		case ok && fresh >= fleetRefit, !ok && fresh != size:
			return nil, snapErr("fleet shard %d holding %d, %d since its fit", s, size, fresh)
		case ok && !(lo <= hi && hi <= fleetMaxDeviation && lo >= 0), !ok && (lo != 0 || hi != 0):
			return nil, snapErr("fleet shard %d (holding %d) fitted at %g and %g", s, size, lo, hi)
		}
		vals := d.F32s(uint64(size), "fleet deviations")
		if d.Err() != nil {
			return nil, sealedErr(d.Err())
		}
		for _, v := range vals {
			if !(v >= 0 && v <= fleetMaxDeviation) {
				return nil, snapErr("fleet shard %d holds a deviation of %g", s, v)
			}
		}
		sh := &f.shards[s]
		*sh = fleetShard{next: int(next), size: int(size), fresh: int(fresh), lo: lo, hi: hi, ok: ok}
		if size > 0 {
			sh.ring = make([]float32, fleetPool)
			copy(sh.ring, vals)
		}
	}
	f.fitFleet()
	return f, nil
}
