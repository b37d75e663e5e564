package ingest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSourceCommitInFlightBlocksNothing (kfake): while a commit request waits on a slow
// coordinator, a generation's start (newGeneration, on the group's goroutine; Next's re-reads
// take the same lock) goes on, and another Commit gives up when its context ends. Before, the
// commit held the Source's commit lock through its request and the back-off of its retries
// (3 attempts): both waited for the whole sequence (here until the test released the
// coordinator, 3 s later), and a Commit ignored its context meanwhile.
func TestSourceCommitInFlightBlocksNothing(t *testing.T) {
	env := kfakeEnv(t)
	produce(t, env, makeMessages(0, 0, 5, false))
	cfg := itConfig(env, fmt.Sprintf("g-commitlock-%d", time.Now().UnixNano()))
	src := openSource(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, _, err := src.Next(ctx)
	if err != nil || b == nil {
		t.Fatalf("Next: batch %v, err %v", b, err)
	}
	b.Ack()
	b.Release()

	// The coordinator holds every commit request until released (at the latest after 3 s,
	// so that a blocked test ends).
	release := make(chan struct{})
	releaseOnce := time.AfterFunc(3*time.Second, func() { close(release) })
	defer func() {
		if releaseOnce.Stop() {
			close(release)
		}
	}()
	arrived := make(chan struct{}, 1)
	c := env.br.Kfake
	c.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		c.SleepControl(func() { <-release })
		return nil, nil, false // then answered as usual
	})
	first := make(chan error, 1)
	go func() {
		_, err := src.Commit(ctx)
		first <- err
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no commit request reached the coordinator in 10 s")
	}

	start := time.Now()
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	// 1 s: the Commit needs its 200 ms, the generation's start a lock held for a map update;
	// blocked, they waited the 3 s until the release.
	second := make(chan error, 1)
	go func() {
		_, err := src.Commit(short)
		second <- err
	}()
	select {
	case err := <-second:
		if took := time.Since(start); took > time.Second || err == nil {
			t.Fatalf("a Commit with 200 ms to go returned %v after %v, want its context's end at once", err, took)
		}
	case <-release:
		t.Fatalf("a Commit with 200 ms to go was still waiting after %v", time.Since(start).Round(time.Millisecond))
	}
	started := make(chan struct{})
	go func() {
		src.newGeneration(Assignment{Generation: 1, Partitions: []int32{0, 1, 2}})
		close(started)
	}()
	select {
	case <-started:
	case <-release:
		t.Fatalf("a generation's start waited %v for a commit in flight", time.Since(start).Round(time.Millisecond))
	}
	if releaseOnce.Stop() {
		close(release)
	}
	if err := <-first; err != nil {
		t.Fatalf("the commit held by the coordinator: %v", err)
	}
}
