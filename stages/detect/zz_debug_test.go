package detect

import (
	"fmt"
	"testing"
)

func TestZZDebugFleet(t *testing.T) {
	unit := func(int) float64 { return 2 }
	rows := shiftFleet(10, 2200, 1500, 300, 6, 0, unit, 6)
	cfg := keyedConfig()
	cfg.Keys.Tail = TailFleet
	s, mem, done := fleetStage(t, cfg)
	defer done()
	sc := feedRows(t, s, mem, rows, 0, len(rows), atRow, inPartition0)
	f := &s.keyed.fleet
	fmt.Println("fit", f.ok, f.lo, f.hi)
	n := 0
	for i, row := range rows {
		if row.key == "shifted" {
			if n >= 1490 && n < 1560 {
				fmt.Printf("%d:%.0f/%.1f/%v/%v/%v/%v ", n, row.value, sc[i].Score, sc[i].Outlier, sc[i].Suppressed, sc[i].Held, sc[i].ByKey)
			}
			n++
		}
	}
}
