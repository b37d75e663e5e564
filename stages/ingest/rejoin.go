package ingest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
)

// Rejoining quickly after a broker outage.
//
// When kafka-go's consumer group loses its coordinator (the broker stopped), it gives up its
// member id: it sends a LeaveGroup, which fails while the broker is down, and joins again as
// a new member. The broker, once back, still has the old member in the group (group state is
// durable), so the new member's JoinGroup waits for the old one to rejoin or expire: one
// session_timeout (30 s by default) with nothing consumed. kafka-go keeps no member id across
// that path and has no option for it (v0.4.51, consumergroup.go run: "leave the group ...
// clear the member id"). So the Source finishes the LeaveGroup itself: it learns the abandoned
// member id from kafka-go's log line "Leaving group <group>, member <id>" and repeats the
// LeaveGroup until the broker answers. The rebalance then completes as soon as the new member
// has joined: measured 30.2 s before, 0.8-3.2 s after (pipeline TestBrokerOutageRealBroker).
// Leaving a member that already left is harmless (the broker answers UNKNOWN_MEMBER_ID), and
// kafka-go never reuses an id it abandoned.
//
// Two paths needed more than that (TestBrokerOutageRealBroker still stalled 30 s now and then:
// 4 runs of 12 with a 100 ms heartbeat, 1 of 6 at the default one under load, none of 38 after;
// docs/BENCHMARKS.md §4.8.1. TestSourceRejoinAfterFailedJoin and
// TestSourceRejoinAfterLeaveNotKept make each happen on kfake):
//   - kafka-go abandons a member id without a word when a JoinGroup with it fails (its
//     joinGroup returns "" on any error, and run's leaveGroup("") does nothing): the
//     generation ended while the broker was shutting down, FindCoordinator was still
//     answered, the JoinGroup was not. The reaper therefore tracks the id of kafka-go's last
//     JoinGroup answer ("joined group <group> as member <id> ...") and abandons it at the
//     ErrorLogger's "Failed to join group <group>: <err>".
//   - A LeaveGroup answered by a broker that is shutting down (or starting) may not survive
//     its restart: the answer comes from the coordinator's memory, the group's state without
//     the member evidently never reached its log, and the restarted broker had the member
//     again (seen in all 5 slow runs: answered, then the new member's join waited 30 s). An answered LeaveGroup therefore proves nothing until the
//     group has moved on: the reaper repeats it (every leaveRetryMax; the answer is then
//     UNKNOWN_MEMBER_ID, or the leave that counts) until a generation of another member has
//     started, whose SyncGroup answer came after the group's new state was written.

// kafka-go's log formats the Source reads (consumergroup.go, v0.4.51): from its Logger the
// first two, from its ErrorLogger the last.
const (
	logJoinedGroup  = "joined group %s as member %s in generation %d"
	logLeavingGroup = "Leaving group %s, member %s"
	logJoinFailed   = "Failed to join group %s: %v"
)

// leaveRetryMin and leaveRetryMax bound the wait between LeaveGroup attempts while the broker
// is away: short, since the point is to reach it as soon as it answers. leaveRetryMax is also
// the pace of the repeats after an answer.
const (
	leaveRetryMin = 100 * time.Millisecond
	leaveRetryMax = time.Second
)

// memberReaper sends the LeaveGroup of abandoned member ids until the group has moved on.
type memberReaper struct {
	group     string
	client    *kafka.Client
	transport *kafka.Transport
	log       zerolog.Logger
	// leaveGroup sends one LeaveGroup for member (the client's; tests replace it).
	leaveGroup func(ctx context.Context, member string) error
	retryMin   time.Duration
	retryMax   time.Duration

	mu     sync.Mutex
	closed bool
	// joined is the member id of kafka-go's last JoinGroup answer, until kafka-go leaves or
	// loses it ("" then).
	joined string
	// abandoned holds, for each member id being left, a channel closed when a generation of
	// another member starts.
	abandoned map[string]chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func newMemberReaper(group string, brokers []string, tr *kafka.Transport, log zerolog.Logger) *memberReaper {
	ctx, cancel := context.WithCancel(context.Background())
	if tr == nil {
		// A transport of its own (not kafka.DefaultTransport, which close must not touch).
		tr = &kafka.Transport{DialTimeout: 5 * time.Second}
	}
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second, Transport: tr}
	m := &memberReaper{group: group, client: cl, transport: tr, log: log, ctx: ctx, cancel: cancel,
		retryMin: leaveRetryMin, retryMax: leaveRetryMax, abandoned: map[string]chan struct{}{}}
	m.leaveGroup = m.sendLeaveGroup
	return m
}

// observe is called with every line of kafka-go's Logger and ErrorLogger; a member that
// kafka-go abandons is left for it in the background.
func (m *memberReaper) observe(msg string, args []any) {
	if m == nil || len(args) < 2 || (msg != logJoinedGroup && msg != logLeavingGroup && msg != logJoinFailed) {
		return
	}
	if group, ok := args[0].(string); !ok || group != m.group {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch msg {
	case logJoinedGroup:
		if member, ok := args[1].(string); ok {
			m.joined = member
		}
	case logLeavingGroup:
		if member, ok := args[1].(string); ok && member != "" {
			if member == m.joined {
				m.joined = ""
			}
			m.abandon(member)
		}
	case logJoinFailed:
		// kafka-go's next JoinGroup is without an id (consumergroup.go joinGroup returns ""
		// on every error): the one it had is abandoned without a LeaveGroup.
		if m.joined != "" {
			m.abandon(m.joined)
			m.joined = ""
		}
	}
}

// abandon starts leaving member unless it is being left already. m.mu must be held.
func (m *memberReaper) abandon(member string) {
	if m.closed {
		return // the Source is closing: kafka-go leaves on its own
	}
	if _, ok := m.abandoned[member]; ok {
		return
	}
	moved := make(chan struct{})
	m.abandoned[member] = moved
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.leave(member, moved)
	}()
}

// generationStarted is called when a generation of member starts: the group has moved on
// from every other member being left (see above), whose LeaveGroups stop.
func (m *memberReaper) generationStarted(member string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, moved := range m.abandoned {
		if id != member {
			close(moved)
			delete(m.abandoned, id)
		}
	}
}

// sendLeaveGroup sends one LeaveGroup for member; the error is the request's, the group's or
// the member's.
func (m *memberReaper) sendLeaveGroup(ctx context.Context, member string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := m.client.LeaveGroup(ctx, &kafka.LeaveGroupRequest{GroupID: m.group,
		Members: []kafka.LeaveGroupRequestMember{{ID: member}}})
	if err == nil {
		err = res.Error
		for _, mr := range res.Members {
			err = errors.Join(err, mr.Error)
		}
	}
	return err
}

// leave sends LeaveGroup for member until the group has moved on (moved closed) or the Source
// closes: until the coordinator answers, and after that too (see above).
func (m *memberReaper) leave(member string, moved <-chan struct{}) {
	wait := m.retryMin
	answered := false
	for attempt := 1; ; attempt++ {
		err := m.leaveGroup(m.ctx, member)
		switch {
		case m.ctx.Err() != nil:
			return
		case err == nil:
			if !answered {
				m.log.Info().Str("member", member).Int("attempts", attempt).
					Msg("left the group for a member the consumer abandoned (no wait for its session to expire)")
			} else {
				m.log.Info().Str("member", member).Int("attempts", attempt).
					Msg("left the group again for a member the consumer abandoned: the broker had it again (an earlier LeaveGroup was answered, not kept)")
			}
			answered = true
		case errors.Is(err, kafka.UnknownMemberId):
			answered = true // it had left already
		case errors.Is(err, kafka.GroupAuthorizationFailed):
			m.log.Warn().Err(err).Str("member", member).Msg("leaving the group for an abandoned member failed; the broker drops it after session_timeout")
			return
		}
		// Anything else is the broker being away (kafka-go's transport answers
		// BROKER_NOT_AVAILABLE then) or the coordinator loading the group: try again soon.
		if answered {
			wait = m.retryMax
		}
		select {
		case <-m.ctx.Done():
			return
		case <-moved:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, m.retryMax)
	}
}

// close stops the LeaveGroups in flight and waits for them.
func (m *memberReaper) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	m.transport.CloseIdleConnections()
}
