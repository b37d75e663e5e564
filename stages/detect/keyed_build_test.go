package detect

import (
	"math/rand/v2"
	"testing"
)

// keyWindow is a key's state with a full window of w records of 3 features as the keyed
// benchmarks' stream has them (feature a around i, b and c standard normal), every sig-th
// record marked significant (0: none).
func keyWindow(cfg *Config, i int, r *rand.Rand, sig int) *keyState {
	w := cfg.Keys.Window
	st := &keyState{cols: make([][]float32, 3), sig: make([]bool, w)}
	for j := range st.cols {
		st.cols[j] = make([]float32, w)
	}
	for t := range w {
		st.cols[0][t] = float32(i) + float32(r.NormFloat64())
		st.cols[1][t], st.cols[2][t] = float32(r.NormFloat64()), float32(r.NormFloat64())
		st.sig[t] = sig > 0 && t%sig == 0
	}
	st.size, st.next = w, r.IntN(w)
	return st
}

// BenchmarkKeyBuild: one key's model build (buildKeyModel) at the default settings (keys.window
// 200, keys.k 10, 3 features), a full window with a few records left out as significant: the
// work each of a key's rebuilds does, one build per keys.window/4 of its records.
func BenchmarkKeyBuild(b *testing.B) {
	cfg := Default()
	cfg.KeyBy = KeyByKey
	r := rand.New(rand.NewPCG(3, 3))
	sts := make([]*keyState, 64)
	for i := range sts {
		sts[i] = keyWindow(&cfg, i, r, 37)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := buildKeyModel(sts[i%len(sts)], &cfg); err != nil {
			b.Fatal(err)
		}
	}
}
