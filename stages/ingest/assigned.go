package ingest

import (
	"reflect"
	"slices"
	"sync"
)

// The partitions a Source is assigned (detect.key_by on a scorer: it keeps the models of its
// partitions' keys only; pipeline/modelkeys.go). kafka-go's Reader has no assignment callback, but
// at every generation it logs "subscribed to topics and partitions: %+v" with the assigned
// (topic, partition) -> offset map (reader.go subscribe, v0.4.51), on its Logger: the Source
// reads the assignment from that event, as rejoin.go reads the member ids it abandons.
// TestSourceAssignedRealBroker holds the Source to kafka-go's event.

// logSubscribed is kafka-go's format of the assignment event.
const logSubscribed = "subscribed to topics and partitions: %+v"

// assignment is the Source's view of its assigned partitions.
type assignment struct {
	topic string
	mu    sync.Mutex
	on    func(partitions []int32)
	last  []int32 // the latest assignment (nil: none heard yet)
}

// observe takes a kafka-go log event; an assignment event of the topic reaches on.
func (a *assignment) observe(msg string, args []any) {
	if msg != logSubscribed || len(args) != 1 {
		return
	}
	parts, ok := assignedPartitions(args[0], a.topic)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock() // (held while on runs: assignments reach it one at a time, in order)
	a.last = parts
	if a.on != nil {
		a.on(parts)
	}
}

// assignedPartitions reads the partitions of topic from kafka-go's map[topicPartition]int64
// (unexported: its fields topic and partition are read by reflection), ascending; ok is false
// for anything else.
func assignedPartitions(m any, topic string) (parts []int32, ok bool) {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Map || v.Type().Key().Kind() != reflect.Struct {
		return nil, false
	}
	kt := v.Type().Key()
	tf, ok1 := kt.FieldByName("topic")
	pf, ok2 := kt.FieldByName("partition")
	if !ok1 || !ok2 || tf.Type.Kind() != reflect.String || pf.Type.Kind() != reflect.Int32 {
		return nil, false
	}
	parts = []int32{}
	for _, k := range v.MapKeys() {
		if k.FieldByIndex(tf.Index).String() == topic {
			parts = append(parts, int32(k.FieldByIndex(pf.Index).Int()))
		}
	}
	slices.Sort(parts)
	return parts, true
}

// OnAssigned makes f hear the Source's partitions of its topic at every new assignment (a
// rebalance; empty when it has none), on kafka-go's goroutine, one at a time and in order; an
// assignment heard before OnAssigned reaches f at once (the reader joins its group as soon as
// it is made).
func (s *Source) OnAssigned(f func(partitions []int32)) {
	a := s.assigned
	a.mu.Lock()
	defer a.mu.Unlock()
	a.on = f
	if a.last != nil {
		f(a.last)
	}
}
