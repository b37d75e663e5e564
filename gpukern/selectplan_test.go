package gpukern

import "testing"

// TestSelectPlan holds selectLaunch's level plan to the buffers it writes, for every number of
// ss_select blocks up to 10M rows' and takes around the plan's edges: each level but the last
// writes at most the buffer it lands in (ss_select's blocks*take pairs and the second buffers'
// ssSelect2Len, alternating: ss_select_tail's first level, the second-to-last, writes there too)
// and shrinks the list; the last level is one slice, the one block that writes the final take
// pairs (a second slice would write past them), which with one level is ss_select_tail's whole
// grid; and without a level there is one list only where there is one block (else the host
// takes every block's).
func TestSelectPlan(t *testing.T) {
	for _, take := range []int{1, 2, 37, 100, 511, 1000, 1023, 1024, 1025, 1500, 2048} {
		for blocks := 1; blocks <= 10_000_000/ssSelectSlice+1; blocks++ {
			levels := ssSelectLevels(blocks, take)
			if 2*take > ssSelectSlice {
				if levels != 0 {
					t.Fatalf("blocks=%d take=%d: %d levels where a level cannot shrink the list", blocks, take, levels)
				}
				continue
			}
			if levels == 0 && blocks > 1 {
				t.Fatalf("blocks=%d take=%d: no level over %d lists", blocks, take, blocks)
			}
			size := [2]int{blocks * take, ssSelect2Len(blocks, take)}
			L, in := blocks*take, 0
			for l := range levels {
				next := ssSelectNext(L, take)
				if l == levels-1 {
					if L > ssSelectSlice || next != take {
						t.Fatalf("blocks=%d take=%d: the last of %d levels takes %d pairs (%d slices) into the final %d", blocks, take, levels, L, (L+ssSelectSlice-1)/ssSelectSlice, take)
					}
					break
				}
				if next >= L || next > size[1-in] {
					t.Fatalf("blocks=%d take=%d: level %d of %d: %d pairs to %d, into a buffer of %d", blocks, take, l+1, levels, L, next, size[1-in])
				}
				L, in = next, 1-in
			}
		}
	}
}
