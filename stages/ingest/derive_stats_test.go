package ingest

import (
	"context"
	"testing"
)

// TestDeriveStatsEvictions: a Deriver with max_keys 2 fed 3 keys holds 2 series and counts 1
// eviction; a key seen again while held evicts nothing, one evicted before evicts again; a
// partition read again (a rebalance) forgets its series without counting them as evictions.
func TestDeriveStatsEvictions(t *testing.T) {
	d := mustDeriver(t, deriveConfig(t, "derive:\n  max_keys: 2\n  features: [{kind: diff, of: temp}]\n"))
	if st := d.Stats(); st != (DeriveStats{}) {
		t.Fatalf("new Deriver: %+v, want all 0", st)
	}
	applyAll(t, d, []rec{{0, 1, "a", 1, monday6}, {0, 2, "b", 2, monday6}, {0, 3, "c", 3, monday6}})
	if st := d.Stats(); st != (DeriveStats{Series: 2, Evictions: 1}) {
		t.Fatalf("3 keys, max_keys 2: %+v, want 2 series, 1 eviction", st)
	}
	applyAll(t, d, []rec{{0, 4, "c", 4, monday6}, {0, 5, "a", 5, monday6}}) // c held; a evicts b
	if st := d.Stats(); st != (DeriveStats{Series: 2, Evictions: 2}) {
		t.Fatalf("c again, a again: %+v, want 2 series, 2 evictions", st)
	}
	applyAll(t, d, []rec{{0, 1, "a", 6, monday6}}) // partition 0 read again: its series forgotten
	if st := d.Stats(); st != (DeriveStats{Series: 1, Evictions: 2}) {
		t.Fatalf("after a re-read: %+v, want 1 series, 2 evictions (a reset is no eviction)", st)
	}
}

// TestDeriveStatsRestored: a Deriver loaded from a saved state reports the series it loaded
// (Restored), which stays what the start loaded while the series held move on; one that loads
// nothing reports 0.
func TestDeriveStatsRestored(t *testing.T) {
	c := deriveConfig(t, stateYAML)
	recs, sds := stateStream(300)
	a := mustDeriver(t, c)
	applySD(a, recs, sds)
	dir := t.TempDir()
	if _, err := a.SaveState(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	b := mustDeriver(t, c)
	if st := b.Stats(); st.Restored != 0 {
		t.Fatalf("before the load: %+v, want 0 restored", st)
	}
	if _, ok, err := b.LoadState(context.Background(), dir); !ok || err != nil {
		t.Fatal(ok, err)
	}
	want := DeriveStats{Series: a.Keys(), Restored: a.Keys()}
	if st := b.Stats(); st != want || want.Series == 0 {
		t.Fatalf("after the load: %+v, want %+v", st, want)
	}
	applySD(b, []rec{{7, 0, "new", 1, monday6}}, []float32{0.5})
	if st := b.Stats(); st.Series != want.Series+1 || st.Restored != want.Restored {
		t.Fatalf("a new key after the load: %+v, want %d series, %d restored", st, want.Series+1, want.Restored)
	}
	e := mustDeriver(t, c)
	if _, ok, err := e.LoadState(context.Background(), t.TempDir()); ok || err != nil {
		t.Fatal(ok, err)
	}
	if st := e.Stats(); st.Restored != 0 {
		t.Fatalf("no file: %+v, want 0 restored", st)
	}
}
