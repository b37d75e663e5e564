package ingest

// A rolling column's warm-up (ingest.derive's mean and std; twenty-sixth session, warm26).
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
// robust_z is not marked: its warm-up is its own min_values (z 0, its neutral value, until
// then), and past it the z is standardised by the series' own scale, a noisier estimate of the
// same quantity, not a shifted one. diff needs one value (its first is 0) and the cyclic pairs
// none.

// warms reports whether a column of kind k has a warm-up the detect stage must not read as
// evidence (the window's first `last` - 1 values).
func (k DeriveKind) warms() bool { return k == DeriveMean || k == DeriveStd }
