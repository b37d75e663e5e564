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

// TestJSONNumbersMatchParseFloat: the JSON decoder's features (plain decimals from the digits
// gathered by its grammar check, the rest through strconv.ParseFloat) are float32 of
// strconv.ParseFloat's value, bit for bit: signs, zeros, up to 31 digits, up to 18 after the
// '.', and exponents.
func TestJSONNumbersMatchParseFloat(t *testing.T) {
	cfg := testConfig(FormatJSON, []string{"a", "b"}, nil)
	dec := mustDecoder(t, cfg)
	out := cfg.NewDecoded()
	r := rand.New(rand.NewPCG(33, 34))
	num := func() string {
		b := []byte{}
		if r.IntN(2) == 0 {
			b = append(b, '-')
		}
		if r.IntN(4) == 0 {
			b = append(b, '0')
		} else {
			b = append(b, byte('1'+r.IntN(9)))
			for range r.IntN(12) {
				b = append(b, byte('0'+r.IntN(10)))
			}
		}
		if r.IntN(3) > 0 {
			b = append(b, '.')
			for range 1 + r.IntN(18) {
				b = append(b, byte('0'+r.IntN(10)))
			}
		}
		if r.IntN(5) == 0 {
			b = append(b, "eE"[r.IntN(2)])
			if r.IntN(2) == 0 {
				b = append(b, "+-"[r.IntN(2)])
			}
			b = append(b, byte('0'+r.IntN(10)))
		}
		return string(b)
	}
	for range 100000 {
		a, b := num(), num()
		if err := dec.Decode([]byte(`{"a":`+a+`,"x":`+num()+`,"b":`+b+`}`), out); err != nil {
			t.Fatalf("%s, %s: %v", a, b, err)
		}
		for j, s := range []string{a, b} {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := math.Float32bits(out.Values[j]), math.Float32bits(float32(v)); got != want {
				t.Fatalf("%s: decoded %v (%x), ParseFloat %v (%x)", s, out.Values[j], got, float32(v), want)
			}
		}
	}
}
