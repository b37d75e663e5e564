package ingest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/outlierd/outlierd/internal/core/checkpoint"
	"github.com/outlierd/outlierd/internal/testsupport"
)

// TestSourceSaysWhenAssigned (newuser31): after a kill -9 the restarted instance logged
// "pipeline starting" and then nothing for the 30 s its group waited for the killed member's
// session, while /readyz said only "nothing fetched since the brokers answered". The Source now
// tells whether the group has assigned it anything (AssignmentHeard: /readyz's reason) and logs
// each assignment, with the partitions and where they are read from (on kfake).
func TestSourceSaysWhenAssigned(t *testing.T) {
	env := kfakeEnv(t)
	var logs testsupport.LogBuffer
	cfg := itConfig(env, fmt.Sprintf("g-heard-%d", time.Now().UnixNano()))
	src, err := NewSource(cfg, checkpoint.New(), memory.NewGoAllocator(), zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !src.AssignmentHeard() {
		if time.Now().After(deadline) {
			t.Fatal("no assignment heard in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	lines := logs.Lines("consumer group assigned this member its partitions")
	if len(lines) != 1 {
		t.Fatalf("assignment lines %q, want one; log:\n%s", lines, logs.String())
	}
	for _, want := range []string{`"partitions":[0,1,2]`, `"generation":`, `"from_offsets":[`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("assignment line %s lacks %s", lines[0], want)
		}
	}
}
