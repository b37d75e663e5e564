package detect

import (
	"slices"
	"sync"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/outlierd/outlierd/internal/core/batch"
)

// A key's series across its handovers (detect.flag_clear under key_by: key). A record's series
// is its key whichever model scores it: the global model while the key warms, then its own.
// The deadband holds a record after its series' flagged record on either path: the global
// model's (capAlarms, the stage's cap; seriesAlarms keeps the keys in alarm there) and the key's
// own (its cap, alarmCap.last). Across the two:
//
//   - to the key's model: the records of a key whose cap has admitted none yet (its first by its
//     own model: its warm-up ended, or it warmed again after an eviction, or a scorer installed
//     its model) wait for capAlarms, which decides them in stream order after the batch's
//     warming records, the first one continuing the key's series on the global path (its last
//     warming record's flag, at most `window` records back). Their flags cannot be decided in
//     the keys' pass: a key's model is built mid-batch, and its warming records' flags in the
//     same batch are the stage's cap's, decided after the pass. Once per key per warm-up.
//   - back to the global model: a key evicted (or retired by its builder) whose last record was
//     flagged by its own cap hands that flag to the global path at that record's position
//     (alarmCap.at), so that its next record, scored by the global model, is held as its own
//     cap would have held it (at most `window` records back, as on that path).
//
// A model refresh keeps the key's cap, and so its series; a restart from state_dir keeps both
// paths' (the keys' state and the alarm state: alarm_state.go), keys evicted since the last batch
// included (alarmsCopy notes their flags as the next batch would). Both paths run on the host, shared by
// the CPU and CUDA builds (the device scores; the caps decide).

// handover is what a keys' pass leaves to its batch's capAlarms.
type handover struct {
	on   bool   // capAlarms decides (a stage's keys: a builder's flag nothing, and a bare keyedScorer's pass decides alone)
	from uint64 // the stream position before the batch (seriesAlarms.pos): record i's is from+i+1
	mu   sync.Mutex
	rows []handRow  // the batch's records whose key's cap waits (the pass's workers add them)
	back []handBack // keys evicted whose last record was flagged, since the last capAlarms
}

// handRow is record i, scored by st's model, whose flag capAlarms decides in st's cap.
type handRow struct {
	i  int
	st *keyState
}

// handBack is an evicted key's last record's position, flagged by the key's cap.
type handBack struct {
	key string
	at  uint64
}

// waits says whether record i, scored by st's model, waits for capAlarms (st's cap has admitted
// no record yet), and lists it then; else it notes i's position in st's cap (its admission is
// the caller's).
func (h *handover) waits(st *keyState, i int) bool {
	if h == nil || !h.on {
		return false
	}
	if st.cap.filled != 0 {
		st.cap.at = h.from + uint64(i) + 1
		return false
	}
	h.mu.Lock()
	h.rows = append(h.rows, handRow{i, st})
	h.mu.Unlock()
	return true
}

// start begins a batch's keys' pass at stream position from.
func (h *handover) start(from uint64) {
	h.from = from
	clear(h.rows)
	h.rows = h.rows[:0]
}

// evicted hands st's series back to the global model's path when its last record was flagged.
func (h *handover) evicted(st *keyState) { h.evictedCap(st.key, st.cap) }

// evictedCap is evicted of key with cap c (a scorer's saved cap whose key was retired while it
// was down has no keyState).
func (h *handover) evictedCap(key string, c *alarmCap) {
	if h.on && c.at != 0 && c.last() {
		h.back = append(h.back, handBack{key, c.at})
	}
}

// take returns the batch's waiting records in stream order and the keys handed back, and
// forgets them.
func (h *handover) take() ([]handRow, []handBack) {
	rows, back := h.rows, h.back
	h.rows, h.back = nil, nil
	if len(rows) > 1 {
		slices.SortFunc(rows, func(a, b handRow) int { return a.i - b.i })
	}
	return rows, back
}

// handBack notes in the global model's path the keys handed back by the batch's keys' pass or
// since the batch before (their last records up to the batch's last, s.pos; those more than
// window records before the batch's first, start+1, are stale). A key's own records come
// before its eviction: the batch's records after its position are its next ones.
func (s *seriesAlarms) handBack(back []handBack, start uint64, window, limit int) {
	for _, b := range back {
		if b.at <= s.pos && b.at+uint64(window) >= start+1 {
			s.note([]byte(b.key), b.at, true, window, limit)
		}
	}
}

// decideWaiting decides record i of scores, scored by st's model and waiting (handover.waits),
// in st's cap at stream position q: held when its series' previous record was flagged, which for
// st's first record is the key's last on the global model's path (s), at most window records
// back. The key's series is its cap's from then on (the global path's memory of it ends), but
// where st was evicted since (its cap is gone): its flag goes back to the global path.
func (s *seriesAlarms) decideWaiting(sc *batch.Score, st *keyState, keys *array.Binary, i int, q uint64, cfg *Config) {
	key := recordKey(keys, i)
	sig := sc.Score >= sc.Threshold
	previous := st.cap.last() || st.cap.filled == 0 && s.inAlarm(key, q, cfg.Window)
	sc.Outlier, sc.Held = st.cap.admitRun(sig, previous, sc.Score, cfg.clearScore(), capLimit(cfg.AlarmRate, cfg.Keys.Window))
	sc.Suppressed = sig && !sc.Outlier
	st.cap.at = q
	if !sc.Outlier && !sc.Suppressed {
		sc.Deviations = nil // (explained in the keys' pass in case it was flagged)
	}
	if st.gone {
		s.note(key, q, sc.Outlier, cfg.Window, capLimit(cfg.AlarmRate, cfg.Window))
	} else {
		s.forget(key)
	}
}
