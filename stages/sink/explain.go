package sink

import "github.com/outlierd/outlierd/internal/core/batch"

// Explain is the one-line explanation of a record's scores that its JSON output carries in
// "explanation" (the live view shows the same line for each alert).
func Explain(s batch.Score) string { return explain(s) }
