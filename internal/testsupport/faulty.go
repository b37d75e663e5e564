package testsupport

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fault is what a FaultyBroker does with every request it receives while it is set.
type Fault int32

const (
	// Answer: every request is handled as kfake handles it.
	Answer Fault = iota
	// Lose: every request is taken and never answered (a broker that lost it, a leader that
	// takes connections and answers nothing); what was lost stays unanswered.
	Lose
	// Refuse: every request's connection is closed (a broker that drops its clients: each
	// attempt fails at once, with EOF or a reset).
	Refuse
)

// FaultyBroker is a kfake cluster of one broker (plus opts, e.g. kfake.SeedTopics) and set,
// which makes it meet every request it receives from then on with f (Answer: as kfake does).
func FaultyBroker(tb testing.TB, opts ...kfake.Opt) (br Broker, set func(f Fault)) {
	tb.Helper()
	br = KfakeBroker(tb, opts...)
	var fault atomic.Int32
	br.Kfake.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		br.Kfake.KeepControl()
		switch Fault(fault.Load()) {
		case Lose:
			return nil, nil, true // (handled with no response: the request is dropped)
		case Refuse:
			return nil, errors.New("refused by the test"), true // (kfake closes the connection)
		default:
			return nil, nil, false
		}
	})
	return br, func(f Fault) { fault.Store(int32(f)) }
}

// LosingBroker is a FaultyBroker whose lose(true) makes it Lose every request until lose(false).
func LosingBroker(tb testing.TB, opts ...kfake.Opt) (br Broker, lose func(bool)) {
	tb.Helper()
	br, set := FaultyBroker(tb, opts...)
	return br, func(on bool) {
		if on {
			set(Lose)
		} else {
			set(Answer)
		}
	}
}
