package ingest

// A rolling column's warm-up (ingest.derive's mean, std and robust_z; twenty-sixth session, warm26).
//
// A series starts afresh whenever its key is first seen: a new key, and every key after a
// restart, a rebalance or an eviction (the derive state is in memory only). Until it holds
// `last` values its mean and std are over fewer: a std of one value is 0 and of a few values
// often near 0 (the stuck sensor's signature), a mean of n values is sqrt(last/n) times as
// spread as the full window's, so a model that learnt full windows reads a series' first
// records as far out (a second key's first three records scored 8.6 / 4.8 / 5.2: §12.59; a
// restart of 20 keys flagged every key's first record: TestReplayRollingWarmupNotFlagged).
//
// The derive cannot give such a record a neutral value: a neutral std is the model's, which it
// does not know. So it marks it: Decoded.Warming[j] is set while column j's window holds fewer
// than `last` values, the builder writes that value with its Arrow validity bit cleared (null,
// the value kept in the buffer), and the detect stage scores the record with each such column
// at a value the serving model gives it (a key's model: its median of the column; the global
// model: the column's mean over the record's nearest records of its sample in its other
// columns, stages/detect/warmup_impute.go), the other columns' evidence counting as before: a
// spike on a warming key is still found, and the reason cites no warming column
// (stages/detect/warmup.go). The pipeline and replay pass through the same builder and
// stage, so they agree.
//
// robust_z is marked too (derive28; docs/BENCHMARKS.md §12.71) while fewer than `last` values
// precede the record (its window is the previous values, the record excluded): its z is 0 up to
// min_values and then standardised by the MAD of fewer values, a noisier scale whose z has
// heavier tails than the full window's. Unmarked, a key's first model (keys.min_records 30) was
// built from such records alone and read its key's next records as far out: a generated clean
// fleet of 50 keys with a robust_z over 32 flagged 92-125 of 40,000, 13-35 marked (9-22 without
// the column); +8 sd spikes' AP 0.15-0.19 -> 0.68-0.95 (TestReplayKeyedRobustZFirstModelsNotFlagged).
// Marked from min_values only (z 0 below it left in) flagged 18-29: its partial scales are the
// part that misleads, and `last` is what a user reads as the window (the rule's word for mean
// and std). diff needs one value (its first is 0) and the cyclic pairs none.

// warms reports whether a column of kind k has a warm-up the detect stage must not read as
// evidence (mean and std: the window's first `last` - 1 values; robust_z: its first `last`).
func (k DeriveKind) warms() bool { return k == DeriveMean || k == DeriveStd || k == DeriveRobustZ }
