package metrics

import (
	"fmt"
	"time"
)

// What /readyz says of a source that has fetched nothing while the input has lag. Right after a
// start the likeliest cause is the consumer group: a member that stopped without leaving it
// (kill -9, a crash, a lost host) holds its partitions until its session expires
// (ingest.session_timeout, 30 s), and the restarted instance's join waits for that. Before
// newuser31 /readyz said only "nothing fetched since the brokers answered" then, and the log
// nothing at all between "pipeline starting" and the first model line 30 s later.

// SetJoining gives Ready the source's wait for its consumer group's first assignment: joining
// returns why nothing can be fetched yet, "" once the group has assigned this member its
// partitions (pipeline: ingest.Source.AssignmentHeard). Without it, Ready says what it said.
func (m *Metrics) SetJoining(joining func() string) { m.joining.Store(&joining) }

// sourceNotConsuming is the source's part of Ready while the input has lag: "" when the source
// fetched within stale, else why not.
func (m *Metrics) sourceNotConsuming(stale time.Duration) string {
	switch last := m.progress.Load(); {
	case last == 0:
		if j := m.joining.Load(); j != nil {
			if why := (*j)(); why != "" {
				return "source not consuming: " + why
			}
		}
		return "source not consuming: nothing fetched since the brokers answered, and the input has lag"
	case m.now().Sub(time.Unix(0, last)) > stale:
		return fmt.Sprintf("source not consuming: nothing fetched for %s, and the input has lag",
			m.now().Sub(time.Unix(0, last)).Round(time.Second))
	}
	return ""
}
