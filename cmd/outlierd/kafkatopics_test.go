package main

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// createTopics runs `outlierd topics create` for the config at path with the given partitions,
// failing the test on a non-zero exit.
func createTopics(t *testing.T, path string, partitions int) {
	t.Helper()
	if _, errs, code := outlierd(t, "topics", "create", "--config", path, "--partitions", strconv.Itoa(partitions)); code != 0 {
		t.Fatalf("topics create: exit %d: %s", code, errs)
	}
}

// outlierOutput is an outlierd JSON output of an outlier with the given id, as tail reads it,
// for partition 0 of topic.
func outlierOutput(topic, id string) *kgo.Record {
	v := fmt.Sprintf(`{"id":%q,"topic":"in","partition":0,"offset":1,"key":null,"timestamp":null,"payload":{},"payload_encoding":"json","scores":{"outlier":true,"score":7},"explanation":"far out","subspace":[],"model_version":1}`, id)
	return &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)}
}

// holdFirstOffsets makes the broker answer its first ListOffsets request (tail's readers
// connecting) after d; the flag it returns says whether that request came.
func holdFirstOffsets(br testsupport.Broker, d time.Duration) *atomic.Bool {
	var held atomic.Bool
	br.Kfake.ControlKey(kmsg.ListOffsets.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !held.Swap(true) {
			time.Sleep(d) // (the cluster waits too: only the readers ask now)
		}
		return nil, nil, false
	})
	return &held
}

// cutTailConnectWait sets tailConnectWait to d for the test.
func cutTailConnectWait(t *testing.T, d time.Duration) {
	old := tailConnectWait
	tailConnectWait = d
	t.Cleanup(func() { tailConnectWait = old })
}
