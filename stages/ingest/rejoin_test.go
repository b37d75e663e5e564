package ingest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The two ways a member kafka-go abandoned was left in the group after a broker outage
// (rejoin.go), each made to happen on kfake: the Source's next generation must start well
// within the 30 s (session_timeout, and kafka-go's rebalance timeout) that the broker otherwise
// waits for the abandoned member. Seen as TestBrokerOutageRealBroker's 30.2 s resumption.

// rejoinBound is how soon after the generation's end the next one must start: kafka-go's join
// backoff (1 s) and the reaper's repeat (leaveRetryMax, 1 s) plus a join round on kfake are
// about 2-3 s; 10 s is TestBrokerOutageRealBroker's bound, a third of the 30 s stall.
const rejoinBound = 10 * time.Second

// rejoinSource starts a Source on a fresh kfake cluster with session_timeout 30 s and returns
// it, the cluster's control and a channel that hears the start of each generation.
func rejoinSource(t *testing.T) (*Source, func(key int16, fn func(kmsg.Request) (kmsg.Response, error, bool)), func(), <-chan time.Time) {
	t.Helper()
	env := kfakeEnv(t)
	cfg := itConfig(env, fmt.Sprintf("g-rejoin-%d", time.Now().UnixNano()))
	cfg.SessionTimeout = 30 * time.Second // the broker's wait for a member that is gone
	s := openSource(t, cfg)
	gens := make(chan time.Time, 16)
	s.OnAssigned(func(Assignment) { gens <- time.Now() })
	select {
	case <-gens:
	case <-time.After(15 * time.Second):
		t.Fatal("no first generation in 15 s")
	}
	return s, env.br.Kfake.ControlKey, env.br.Kfake.KeepControl, gens
}

// failHeartbeat makes the next heartbeat fail: kafka-go ends the generation.
func failHeartbeat(control func(int16, func(kmsg.Request) (kmsg.Response, error, bool)), then func()) {
	control(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if then != nil {
			then()
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp, nil, true
	})
}

// waitGeneration waits for the next generation's start and checks it came within rejoinBound
// of since.
func waitGeneration(t *testing.T, gens <-chan time.Time, since time.Time) {
	t.Helper()
	select {
	case at := <-gens:
		if d := at.Sub(since); d > rejoinBound {
			t.Errorf("next generation %s after the last ended, want < %s", d.Round(time.Millisecond), rejoinBound)
		} else {
			t.Logf("next generation %s after the last ended", d.Round(time.Millisecond))
		}
	case <-time.After(rejoinBound + 5*time.Second):
		t.Fatalf("no next generation %s after the last ended, want < %s (the broker waits 30 s for the abandoned member)", rejoinBound+5*time.Second, rejoinBound)
	}
}

// TestSourceRejoinAfterFailedJoin: the generation ends, and kafka-go's JoinGroup with its
// member id fails (the broker shutting down: FindCoordinator answered, JoinGroup not). kafka-go
// then joins as a new member without leaving the old one or saying which it was; the reaper
// must leave it.
func TestSourceRejoinAfterFailedJoin(t *testing.T) {
	_, control, _, gens := rejoinSource(t)
	var failedJoin atomic.Bool
	control(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		jr := req.(*kmsg.JoinGroupRequest)
		if jr.MemberID == "" {
			return nil, nil, false // a new member's join: the cluster's
		}
		failedJoin.Store(true)
		resp := jr.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp, nil, true
	})
	ended := make(chan time.Time, 1)
	failHeartbeat(control, func() { ended <- time.Now() })
	waitGeneration(t, gens, <-ended)
	if !failedJoin.Load() {
		t.Error("kafka-go's rejoin with its member id never came: the case was not made")
	}
}

// TestSourceRejoinAfterLeaveNotKept: kafka-go loses the coordinator (FindCoordinator fails)
// and abandons its member; its own LeaveGroup fails, the reaper's first one is answered but
// not applied (a broker shutting down: the group without the member never reached its log,
// and the restarted broker loads the member again). The reaper must leave it again.
func TestSourceRejoinAfterLeaveNotKept(t *testing.T) {
	s, control, keep, gens := rejoinSource(t)
	var ownLeaves, reaperLeaves atomic.Int32
	control(int16(kmsg.LeaveGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		lr := req.(*kmsg.LeaveGroupRequest)
		resp := lr.ResponseKind().(*kmsg.LeaveGroupResponse)
		if lr.Version < 3 { // kafka-go's own (Conn.leaveGroup, v0): the broker is away
			ownLeaves.Add(1)
			keep()
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return resp, nil, true
		}
		if reaperLeaves.Add(1) > 1 {
			return nil, nil, false // the repeats: the cluster's
		}
		keep()
		for _, m := range lr.Members { // answered, not applied
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: m.MemberID})
		}
		return resp, nil, true
	})
	ended := make(chan time.Time, 1)
	failHeartbeat(control, func() {
		ended <- time.Now()
		// kafka-go's next FindCoordinator fails: it abandons its member (run: leaveGroup).
		control(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
			resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			for _, k := range req.(*kmsg.FindCoordinatorRequest).CoordinatorKeys {
				resp.Coordinators = append(resp.Coordinators, kmsg.FindCoordinatorResponseCoordinator{Key: k, ErrorCode: resp.ErrorCode})
			}
			return resp, nil, true
		})
	})
	waitGeneration(t, gens, <-ended)
	if ownLeaves.Load() == 0 || reaperLeaves.Load() == 0 {
		t.Errorf("LeaveGroups: %d of kafka-go's, %d of the reaper's; want both: the case was not made", ownLeaves.Load(), reaperLeaves.Load())
	}
	// The repeats end with the new generation: over two more repeat intervals at most the one
	// that may have been in flight when it started.
	n := reaperLeaves.Load()
	time.Sleep(2*leaveRetryMax + 500*time.Millisecond)
	if m := reaperLeaves.Load(); m > n+1 {
		t.Errorf("the reaper sent %d more LeaveGroups after the new generation started, want at most 1", m-n)
	}
	s.reaper.mu.Lock()
	defer s.reaper.mu.Unlock()
	if len(s.reaper.abandoned) != 0 {
		t.Errorf("the reaper still leaves %v after the new generation started", s.reaper.abandoned)
	}
}
