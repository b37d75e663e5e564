package batch

import "testing"

// TestDeviationsTextOrdinaryReadings (newuser29): a flag whose farthest feature is within FarSD
// robust sd of the window's median says so instead of giving that ordinary reading as the
// cause; a far feature keeps the plain wording, a held record (score below the threshold) does
// not claim its combination is rare, and a key's record names its key's window.
func TestDeviationsTextOrdinaryReadings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		s    Score
		want string
	}{
		{"none", Score{}, ""},
		{"far", Score{Deviations: []Deviation{{"temp", 23.4}, {"humidity", -12}}},
			"temp +23.4 robust sd, humidity -12 robust sd from the window's median"},
		{"at the level", Score{Deviations: []Deviation{{"temp", -3}}}, "temp -3 robust sd from the window's median"},
		{"ordinary", Score{Deviations: []Deviation{{"temp", -1.3}}},
			"every feature within 3 robust sd of the window's median (the farthest: temp -1.3): the combination is what is rare"},
		{"ordinary, held", Score{Held: true, Deviations: []Deviation{{"temp", 2.81}}},
			"every feature within 3 robust sd of the window's median (the farthest: temp +2.81)"},
		{"ordinary, a key's", Score{ByKey: true, Deviations: []Deviation{{"value", 0.5}}},
			"every feature within 3 robust sd of its key's window's median (the farthest: value +0.5): the combination is what is rare"},
		{"far, a key's", Score{ByKey: true, Deviations: []Deviation{{"value", 8.2}}}, "value +8.2 robust sd from its key's window's median"},
	} {
		if got := DeviationsText(&c.s); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
