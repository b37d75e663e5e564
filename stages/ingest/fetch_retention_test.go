package ingest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outlierd/outlierd/internal/testsupport"
)

func TestFetchSkipsRecordsDeletedUnderItKfake(t *testing.T) {
	testFetchSkipsRecordsDeletedUnderIt(t, kfakeEnv(t))
}

func TestFetchSkipsRecordsDeletedUnderItRealBroker(t *testing.T) {
	testFetchSkipsRecordsDeletedUnderIt(t, realEnv(t))
}

// testFetchSkipsRecordsDeletedUnderIt: a partition goroutine falls behind the partition's log
// start (retention or DeleteRecords removed records it had not fetched yet); the broker answers
// its fetch with OffsetOutOfRange, and the fetch goes on from the first retained record rather
// than asking for the deleted offset forever, saying how many records it skipped (lost to this
// consumer). Before, the skip went unsaid: fetchPartition asked for the offsets on the
// connection the failed fetch had left unusable, logged only that this failed ("multiple Read
// calls return no data or error"), and the dial that followed moved the offset up silently.
func testFetchSkipsRecordsDeletedUnderIt(t *testing.T, env kafkaEnv) {
	const n, deleteBelow = 20, 10
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := testsupport.NewProducer(t, env.br)
	defer cl.Close()
	for i := range n { // one record batch each: a fetch of at most 1 byte returns one batch
		r := &kgo.Record{Topic: env.topic, Partition: 0, Value: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	f, errs := testFetcher(env, 1, 1, 0) // unbuffered: the goroutine waits on each record until taken
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.fetchPartition(fctx, 1, 0, kafka.FirstOffset)
	}()
	defer func() { stop(); <-done }()
	recv := func(what string) int64 {
		t.Helper()
		select {
		case c := <-f.chunks:
			if c.err != nil || len(c.msgs) != 1 {
				t.Fatalf("%s: chunk of %d messages, err %v", what, len(c.msgs), c.err)
			}
			return c.msgs[0].m.Offset
		case <-time.After(10 * time.Second): // the fixed fetch takes milliseconds
			t.Fatalf("%s: nothing in 10 s (%d errors logged)", what, len(errs.all()))
			return -1
		}
	}
	if off := recv("the first record"); off != 0 {
		t.Fatalf("first record at offset %d, want 0", off)
	}
	testsupport.DeleteRecordsBelow(t, env.br, env.topic, 0, deleteBelow)
	off := recv("after the deletion")
	if off == 1 { // fetched (and waiting to be taken) before the deletion
		off = recv("after the deletion")
	}
	if off != deleteBelow {
		t.Fatalf("after records below %d were deleted: offset %d, want %d", deleteBelow, off, deleteBelow)
	}
	// The records skipped are said, with where and how many (they are lost to this consumer).
	logged := errs.all()
	want := fmt.Sprintf("partition 0 of %s: offset 2 is before the first retained (%d); skipping %d records", env.topic, deleteBelow, deleteBelow-2)
	if off1 := fmt.Sprintf("partition 0 of %s: offset 1 is before the first retained (%d); skipping %d records", env.topic, deleteBelow, deleteBelow-1); !slices.Contains(logged, want) && !slices.Contains(logged, off1) {
		t.Errorf("logged %q, want %q (or from offset 1, deleted before its fetch)", logged, want)
	}
}
