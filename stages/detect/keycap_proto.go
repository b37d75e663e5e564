package detect

// PROTOTYPE (branch keycap): the key's cap rule, picked at build time
// (-ldflags -X github.com/outlierd/outlierd/stages/detect.keyCapMode=A|Ah|B).
var keyCapMode = ""

// admitKey is the key's cap's admission under keyCapMode.
func (a *alarmCap) admitKey(significant, previous bool, score, clear float64, limit int) (flag, held bool) {
	held = !significant && score >= clear && previous
	want := significant || held
	var over bool // flagged whatever the cap's count
	switch keyCapMode {
	case "A":
		over = significant && previous
	case "Ah":
		over = want && previous
	case "Ahw": // a run past the cap through one window at most
		over = want && previous && a.count < a.n
	case "B":
		flag = a.admitEpisodes(want, previous, limit)
		return flag, held && flag
	}
	n, r := a.n, a.ring()
	if a.filled == n && r.at(int(a.next)) {
		a.count--
	}
	flag = want && (int(a.count) < limit || over)
	r.set(int(a.next), flag)
	if flag {
		a.count++
	}
	a.next = (a.next + 1) % n
	a.filled = min(a.filled+1, n)
	return flag, held && flag
}

// admitEpisodes: count is the number of runs of flags in the ring; a record continuing a run
// (previous flagged) starts none.
func (a *alarmCap) admitEpisodes(want, previous bool, limit int) bool {
	n, r := a.n, a.ring()
	last := a.last()
	if a.filled == n && r.at(int(a.next)) && !r.at(int((a.next+1)%n)) {
		a.count-- // the oldest run leaves the ring
	}
	flag := want && (previous || int(a.count) < limit)
	r.set(int(a.next), flag)
	if flag && !last {
		a.count++
	}
	a.next = (a.next + 1) % n
	a.filled = min(a.filled+1, n)
	return flag
}
