package ingest

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestFastDecimalMatchesParseFloat: where fastDecimal takes a number it gives strconv's
// float64 bit for bit (random plain decimals of 1 to 18 digits, signs, zeros, leading zeros),
// and it declines what it cannot parse exactly (exponents, '+', more than 15 digits, "1.",
// ".5", "-", garbage), which strconv.ParseFloat then parses.
func TestFastDecimalMatchesParseFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	check := func(s string) {
		v, ok := fastDecimal([]byte(s))
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%q: fastDecimal took it (%v), ParseFloat refuses: %v", s, v, err)
		}
		if math.Float64bits(v) != math.Float64bits(want) {
			t.Fatalf("%q: fastDecimal %v (%x), ParseFloat %v (%x)", s, v, math.Float64bits(v), want, math.Float64bits(want))
		}
	}
	took := 0
	for range 200000 {
		b := []byte{}
		if r.IntN(2) == 0 {
			b = append(b, '-')
		}
		nd := 1 + r.IntN(18)
		dot := r.IntN(nd + 2) // sometimes no '.'
		for i := range nd {
			if i == dot && i > 0 {
				b = append(b, '.')
			}
			b = append(b, byte('0'+r.IntN(10)))
		}
		check(string(b))
		if _, ok := fastDecimal(b); ok {
			took++
		}
	}
	if took < 100000 {
		t.Fatalf("fastDecimal took only %d of 200000 plain decimals", took)
	}
	for _, s := range []string{"0", "-0", "-0.0", "0.1", "0.3", "123456789012345", "1234567890.12345", "0.000000000000001",
		"9007199254740993", "1e5", "+1", "1.", ".5", "-", "", "1.2.3", "12a", "-.5", "00012.50"} {
		check(s)
	}
	for _, s := range []string{"1e5", "+1", "1.", ".5", "-", "", "1.2.3", "9007199254740993", "0.0000000000000001"} {
		if _, ok := fastDecimal([]byte(s)); ok {
			t.Errorf("%q: fastDecimal should leave it to strconv.ParseFloat", s)
		}
	}
}
