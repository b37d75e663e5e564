package pipeline

import (
	"slices"
	"testing"

	"github.com/outlierd/outlierd/stages/ingest"
)

// TestReloadRedefiningADerivedColumnIsRejected, a guard (no defect): a reload (SIGHUP, or the
// file's change) that redefines a derived column under its name (of, last, min_values,
// scale_floor, derive.timezone) is a restart key, rejected whole: the running model is neither
// kept scoring the new definition's values nor replaced mid-stream, and the restart that applies
// it moves the old models aside (checkColumns). Checked to fail with ingest.derive classified
// live.
func TestReloadRedefiningADerivedColumnIsRejected(t *testing.T) {
	base := func() Config {
		var c Config
		c.Ingest.Features = []string{"temp", "hum"}
		c.Ingest.Derive = &ingest.Derive{Features: []ingest.DerivedFeature{
			{Kind: ingest.DeriveDiff, Of: "temp", Name: "d"},
			{Kind: ingest.DeriveRobustZ, Of: "hum", Last: 60, Name: "z"},
			{Kind: ingest.DeriveTimeOfDay},
		}}
		return c
	}
	for name, edit := range map[string]func(*ingest.Derive){
		"of":          func(d *ingest.Derive) { d.Features[0].Of = "hum" },
		"min_values":  func(d *ingest.Derive) { d.Features[1].MinValues = 30 },
		"scale_floor": func(d *ingest.Derive) { d.Features[1].ScaleFloor = 0.5 },
		"timezone":    func(d *ingest.Derive) { d.Timezone = "Europe/Berlin" },
	} {
		old, new := base(), base()
		edit(new.Ingest.Derive)
		if ch := ClassifyChanges(old, new); !slices.Contains(ch.Restart, "ingest.derive") || len(ch.Live)+len(ch.Rebuild) > 0 {
			t.Errorf("%s: %+v, want ingest.derive a restart key, nothing live", name, ch)
		}
	}
	if ch := ClassifyChanges(base(), base()); len(ch.Restart)+len(ch.Live)+len(ch.Rebuild) > 0 {
		t.Errorf("the same derive: %+v, want no change", ch)
	}
}
