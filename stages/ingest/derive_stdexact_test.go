package ingest

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// stdExactRef is the std kind's definition computed in exact rationals (math/big), apart from
// the Deriver's code: the values w of a window oldest first (sds its sds, nil without
// uncertainty), full where the window is (the two farthest from the exact mean left out, the
// oldest of equals first). The variance and the propagation's sum are rounded once to the
// nearest float64 (big.Rat.Float64), then float64 sqrt, then float32 (clamped to FLT_MAX).
func stdExactRef(w, sds []float32, full bool) (std, sd float32) {
	rat := func(v float32) *big.Rat { return new(big.Rat).SetFloat64(float64(v)) }
	idx := make([]int, len(w))
	for i := range idx {
		idx[i] = i
	}
	if full {
		mean := new(big.Rat)
		for _, v := range w {
			mean.Add(mean, rat(v))
		}
		mean.Quo(mean, new(big.Rat).SetInt64(int64(len(w))))
		dist := make([]*big.Rat, len(w))
		for i, v := range w {
			dist[i] = new(big.Rat).Abs(new(big.Rat).Sub(rat(v), mean))
		}
		slices.SortStableFunc(idx, func(a, b int) int { return dist[b].Cmp(dist[a]) })
		idx = idx[stdLeftOut:]
		slices.Sort(idx)
	}
	m := len(idx)
	if m < 2 {
		if sds == nil {
			return 0, 0
		}
		return 0, float32(math.Abs(float64(sds[idx[0]])))
	}
	mean := new(big.Rat)
	for _, i := range idx {
		mean.Add(mean, rat(w[i]))
	}
	mean.Quo(mean, new(big.Rat).SetInt64(int64(m)))
	ss, prop, e2 := new(big.Rat), new(big.Rat), new(big.Rat)
	for _, i := range idx {
		dev := new(big.Rat).Sub(rat(w[i]), mean)
		dev.Mul(dev, dev)
		ss.Add(ss, dev)
		if sds != nil {
			e := rat(sds[i])
			e.Mul(e, e)
			e2.Add(e2, e)
			prop.Add(prop, dev.Mul(dev, e))
		}
	}
	v, _ := ss.Quo(ss, new(big.Rat).SetInt64(int64(m-1))).Float64()
	s := math.Sqrt(v)
	var u float64
	if sds != nil {
		if s > 0 {
			p, _ := prop.Float64()
			u = math.Sqrt(p) / float64(float64(m-1)*s)
		} else {
			a, _ := e2.Quo(e2, new(big.Rat).SetInt64(int64(m))).Float64()
			u = math.Sqrt(a) / math.Sqrt(float64(m-1))
		}
	}
	return finite32(s), finite32(u)
}

// stdStreams are the value streams the property tests draw (name, then the i-th value of a
// stream from rng): ordinary noise, integers 0-3 (ties of values and of distances everywhere),
// noise with stuck runs, values over ten decades, values near +-FLT_MAX with zeros, and
// subnormals with +-0.
var stdStreams = []struct {
	name string
	gen  func(rng *rand.Rand, i int) float32
}{
	{"noise", func(rng *rand.Rand, i int) float32 { return float32(70 + 2*rng.NormFloat64()) }},
	{"integers", func(rng *rand.Rand, i int) float32 { return float32(rng.IntN(4)) }},
	{"stuck runs", func(rng *rand.Rand, i int) float32 {
		if (i/40)%2 == 1 {
			return 71.3
		}
		return float32(70 + rng.NormFloat64()*math.Pow(10, -3+10*rng.Float64()))
	}},
	{"decades", func(rng *rand.Rand, i int) float32 {
		return float32(rng.NormFloat64() * math.Pow(10, -30+60*rng.Float64()))
	}},
	{"extremes", func(rng *rand.Rand, i int) float32 {
		return []float32{math.MaxFloat32, -math.MaxFloat32, math.MaxFloat32 / 3, 0, 1, -1e30}[rng.IntN(6)]
	}},
	{"subnormals", func(rng *rand.Rand, i int) float32 {
		v := math.Float32frombits(uint32(rng.IntN(1 << 10)))
		if rng.IntN(2) == 0 {
			v = -v
		}
		return v
	}},
	{"level 1e6", func(rng *rand.Rand, i int) float32 { return float32(1e6 + 0.1*rng.NormFloat64()) }},
}

// stdSDOf is the i-th sd of a stream: 0, ordinary, large, and FLT_MAX now and then.
func stdSDOf(rng *rand.Rand) float32 {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return math.MaxFloat32
	case 2:
		return float32(1e20 * rng.Float64())
	}
	return float32(rng.Float64())
}

// TestDeriveStdMatchesExact: the Deriver's std and its sd, bit for bit, against the exact
// reference stdExactRef on every record of random streams (stdStreams, three keys interleaved)
// at last from 4 (the least) to 100 (under -short to 64), with and without uncertainty: the
// filling start, full windows, ties, stuck runs, values over sixty decades, near +-FLT_MAX,
// subnormals. (trimstd26's two passes failed it at its eighth record: last 4, a window
// spanning 34 decades, whose rounded mean tied the distances of its three small values.)
func TestDeriveStdMatchesExact(t *testing.T) {
	lasts := []int{4, 5, 7, 16, 17, 33, 64, 100}
	if testing.Short() {
		lasts = lasts[:len(lasts)-1]
	}
	for _, last := range lasts {
		for _, withSD := range []bool{false, true} {
			for si, st := range stdStreams {
				yaml := fmt.Sprintf("derive:\n  features: [{kind: std, of: temp, last: %d}]\n", last)
				rng := rand.New(rand.NewPCG(uint64(last), uint64(si)))
				checkRollingExact(t, yaml, last, withSD, st.name, st.gen, rng, fmt.Sprintf("last %d, sds %v", last, withSD), "std", stdExactRef)
			}
		}
	}
}

// checkRollingExact feeds three keys' interleaved values of gen (stream name) through a
// deriver of yaml, whose one derived column is a rolling statistic (stat) over a key's last
// values (with uncertainty under withSD), and fails unless each record's value and sd equal,
// bit for bit, exact's of the key's window (its last values, their sds under withSD, whether it
// is full); where names the case in the failure.
func checkRollingExact(t *testing.T, yaml string, last int, withSD bool, name string, gen func(rng *rand.Rand, i int) float32,
	rng *rand.Rand, where, stat string, exact func(w, sds []float32, full bool) (float32, float32)) {
	t.Helper()
	if withSD {
		yaml = "uncertainty: {suffix: _sd}\n" + yaml
	}
	d := mustDeriver(t, deriveConfig(t, yaml))
	in := &Decoded{Values: make([]float32, 1), SD: make([]float32, 1)}
	const keys = 3
	var xs, es [keys][]float32
	records := 2*last + 100 // a wrap of the ring and then some
	for r := range keys * records {
		k := r % keys
		x, e := gen(rng, r/keys), stdSDOf(rng)
		xs[k], es[k] = append(xs[k], x), append(es[k], e)
		in.Values[0], in.SD[0] = x, e
		out := d.Apply(in, 0, int64(r), []byte{byte('a' + k)}, monday6)
		from := max(0, len(xs[k])-last)
		var sds []float32
		if withSD {
			sds = es[k][from:]
		}
		want, sd := exact(xs[k][from:], sds, len(xs[k]) >= last)
		var gotSD float32
		if withSD {
			gotSD = out.SD[1]
		}
		if math.Float32bits(out.Values[1]) != math.Float32bits(want) || math.Float32bits(gotSD) != math.Float32bits(sd) {
			t.Fatalf("%s, %s, key %d, its value %d: %s %v sd %v, exact %v and %v (window %v)",
				where, name, k, len(xs[k])-1, stat, out.Values[1], gotSD, want, sd, xs[k][from:])
		}
	}
}

// stdTwoPassRef is trimstd26's std (the float64 two passes over the ring, oldest first, it
// replaced), over the window w oldest first, full where the window is.
func stdTwoPassRef(w []float32, full bool) float32 {
	kept := w
	if full {
		var sum float64
		for _, v := range w {
			sum += float64(v)
		}
		mean := sum / float64(len(w))
		far0, far1, best0, best1 := -1, -1, -1.0, -1.0
		for i, v := range w {
			dist := math.Abs(float64(v) - mean)
			if dist > best1 {
				if dist > best0 {
					far0, far1, best0, best1 = i, far0, dist, best0
				} else {
					far1, best1 = i, dist
				}
			}
		}
		kept = nil
		for i, v := range w {
			if i != far0 && i != far1 {
				kept = append(kept, v)
			}
		}
	}
	if len(kept) < 2 {
		return 0
	}
	var sum, ss float64
	for _, v := range kept {
		sum += float64(v)
	}
	mean := sum / float64(len(kept))
	for _, v := range kept {
		dev := float64(v) - mean
		ss += float64(dev * dev)
	}
	return finite32(math.Sqrt(ss / float64(len(kept)-1)))
}

// TestDeriveStdAgainstTwoPass: on ordinary streams (noise around 70 and around 1e6 with a
// spread of 0.1; one key) at last 64, 1440 and 10080 the exact std differs from the two float64
// passes it replaced by at most one float32 rounding step: the passes' rounding error is
// within about 2 (m + 3) float64 ulps of the variance relative to it (the sums of m terms in
// order, the mean's error entering the squares only to second order), some 2^-40 at m = 10078,
// far below float32's half ulp of 2^-24; the two can round to neighbouring float32s only where
// the exact value lies that close to a rounding boundary. A tie of distances that the rounded
// mean decides otherwise could differ by more; on these continuous values it does not occur.
// The test says how many records differ. Where its last is large it checks the exact reference
// (stdExactRef) too, every 97th record.
func TestDeriveStdAgainstTwoPass(t *testing.T) {
	if testing.Short() {
		t.Skip("about 10 s")
	}
	for _, c := range []struct {
		last, records int
		level, spread float64
	}{{64, 200000, 70, 2}, {64, 100000, 1e6, 0.1}, {1440, 20000, 70, 2}, {10080, 25000, 70, 2}} {
		d := mustDeriver(t, deriveConfig(t, fmt.Sprintf("derive:\n  features: [{kind: std, of: temp, last: %d}]\n", c.last)))
		rng := rand.New(rand.NewPCG(uint64(c.last), 27))
		in := &Decoded{Values: make([]float32, 1)}
		var xs []float32
		differ := 0
		for r := range c.records {
			x := float32(c.level + c.spread*rng.NormFloat64())
			xs = append(xs, x)
			in.Values[0] = x
			got := d.Apply(in, 0, int64(r), nil, monday6).Values[1]
			w := xs[max(0, len(xs)-c.last):]
			full := len(w) == c.last
			old := stdTwoPassRef(w, full)
			if got != old {
				differ++
				if got != math.Nextafter32(old, got) {
					t.Fatalf("last %d, level %g, record %d: std %v, the two passes' %v: more than one float32 step apart", c.last, c.level, r, got, old)
				}
			}
			if c.last > 100 && r%97 == 0 {
				if want, _ := stdExactRef(w, nil, full); got != want {
					t.Fatalf("last %d, record %d: std %v, exact %v", c.last, r, got, want)
				}
			}
		}
		t.Logf("last %d, level %g: %d of %d records one float32 step from the two passes", c.last, c.level, differ, c.records)
	}
}

// TestWideQuoFloat: the wide quotient rounds to the nearest float64, ties to even, as
// math/big's exact quotient does, on random numerators of 1-20 words (dense and sparse bits),
// divisors up to 2^40, and ties made on purpose (d = 1 and a numerator of exactly 54
// significant bits whose last is 1).
func TestWideQuoFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	for i := range 200000 {
		words := 1 + rng.IntN(20)
		num := make([]uint64, words)
		for j := range num {
			switch rng.IntN(3) {
			case 0:
				num[j] = rng.Uint64()
			case 1:
				num[j] = 1 << rng.IntN(64)
			}
		}
		d := uint64(1 + rng.Int64N(1<<40-1))
		if i%4 == 0 {
			d = 1 + uint64(rng.IntN(10))
		}
		if i%7 == 0 { // a tie at d = 1: 54 significant bits, the last 1, at a random place
			clear(num)
			pos := rng.IntN(64*words - 54)
			v := rng.Uint64()>>11 | 1<<53 // 54 bits, its top set
			v |= 1
			num[pos/64] |= v << (pos % 64)
			if pos%64 > 10 && pos/64+1 < words {
				num[pos/64+1] |= v >> (64 - pos%64)
			}
			d = 1
		}
		exp2 := -600 + rng.IntN(400)
		if words*64+exp2 > 1000 {
			exp2 = 1000 - words*64
		}
		got := wideQuoFloat(num, d, exp2)
		r := new(big.Rat).SetFrac(wideBig(num), new(big.Int).SetUint64(d))
		if exp2 < 0 {
			r.Quo(r, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(-exp2))))
		} else {
			r.Mul(r, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(exp2))))
		}
		want, _ := r.Float64()
		if got != want {
			t.Fatalf("%x / %d * 2^%d: %v (%x), want %v (%x)", num, d, exp2, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
}

// wideBig is the unsigned t as a big.Int.
func wideBig(t []uint64) *big.Int {
	z := new(big.Int)
	for i := len(t) - 1; i >= 0; i-- {
		z.Lsh(z, 64)
		z.Or(z, new(big.Int).SetUint64(t[i]))
	}
	return z
}

// TestWideSums: adding and removing float32 terms in the wide sums is exact (math/big agrees
// after every step, two's complement read back) on random values over float32's whole range,
// products with sds included, at the widths derive_wide.go gives: no carry is lost.
func TestWideSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 2))
	sums := sumsAt(make([]uint64, stdWideLen(true)), true)
	want := [5]*big.Int{new(big.Int), new(big.Int), new(big.Int), new(big.Int), new(big.Int)}
	var held [][2]float32
	random := func() float32 {
		v := math.Float32frombits(rng.Uint32()&^(0xff<<23) | uint32(rng.IntN(255))<<23) // finite
		if rng.IntN(10) == 0 {
			v = math.MaxFloat32
		}
		return v
	}
	term := func(x, e float32) [5]*big.Int {
		unit := func(v float32) *big.Int { // v in units of 2^-149
			m, s, neg := f32Fixed(v)
			z := new(big.Int).Lsh(new(big.Int).SetUint64(m), s)
			if neg {
				z.Neg(z)
			}
			return z
		}
		xi, ei := unit(x), unit(e)
		e2 := new(big.Int).Mul(ei, ei)
		x2 := new(big.Int).Mul(xi, xi)
		return [5]*big.Int{xi, x2, e2, new(big.Int).Mul(xi, e2), new(big.Int).Mul(x2, e2)}
	}
	signed := func(t []uint64) *big.Int {
		z := wideBig(t)
		if wideIsNeg(t) {
			z.Sub(z, new(big.Int).Lsh(big.NewInt(1), uint(64*len(t))))
		}
		return z
	}
	for i := range 300000 {
		if len(held) < 100000 && (len(held) == 0 || rng.IntN(3) > 0) {
			x, e := random(), random()
			held = append(held, [2]float32{x, e})
			sums.add(x, e, false)
			for j, v := range term(x, e) {
				want[j].Add(want[j], v)
			}
		} else {
			k := rng.IntN(len(held))
			x, e := held[k][0], held[k][1]
			held[k] = held[len(held)-1]
			held = held[:len(held)-1]
			sums.add(x, e, true)
			for j, v := range term(x, e) {
				want[j].Sub(want[j], v)
			}
		}
		if i%997 == 0 || len(held) == 100000 {
			for j, got := range []*big.Int{signed(sums.s()), wideBig(sums.q()), wideBig(sums.a()), signed(sums.b()), wideBig(sums.c())} {
				if got.Cmp(want[j]) != 0 {
					t.Fatalf("step %d, %d terms: sum %d is %v, want %v", i, len(held), j, got, want[j])
				}
			}
		}
	}
}

// TestDeriveStdReusedSeriesExact: a series evicted past max_keys lends its memory to the next
// key, whose std (sums, extremes) starts from nothing: after full windows and wraps of key a,
// key b's values and sds match the exact reference from its first record; two std columns of
// different last and a mean between them keep their state apart.
func TestDeriveStdReusedSeriesExact(t *testing.T) {
	d := mustDeriver(t, deriveConfig(t, "uncertainty: {suffix: _sd}\nderive:\n  max_keys: 1\n  features: [{kind: std, of: temp, last: 4}, {kind: mean, of: temp, last: 3}, {kind: std, of: temp, last: 9}]\n"))
	rng := rand.New(rand.NewPCG(27, 3))
	in := &Decoded{Values: make([]float32, 1), SD: make([]float32, 1)}
	off := int64(0)
	for _, key := range []string{"a", "b", "a"} {
		var xs, es []float32
		for i := range 40 {
			x, e := float32(rng.IntN(5))*1e6+float32(rng.NormFloat64()), float32(rng.Float64())
			xs, es = append(xs, x), append(es, e)
			in.Values[0], in.SD[0] = x, e
			out := d.Apply(in, 0, off, []byte(key), monday6)
			off++
			for _, c := range []struct{ col, last int }{{1, 4}, {3, 9}} {
				from := max(0, len(xs)-c.last)
				std, sd := stdExactRef(xs[from:], es[from:], len(xs) >= c.last)
				if out.Values[c.col] != std || out.SD[c.col] != sd {
					t.Fatalf("key %s, its value %d, std of last %d: %v sd %v, exact %v and %v", key, i, c.last, out.Values[c.col], out.SD[c.col], std, sd)
				}
			}
		}
	}
}
