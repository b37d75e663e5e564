package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/outlierd/outlierd/internal/testsupport"
)

// writeInTransaction writes msgs to topic's partition as one committed transaction: after them
// the partition ends with the transaction's commit marker, a control record no reader hands
// out (kafka-go has no transactional writer: the requests are made one by one here).
func writeInTransaction(t *testing.T, br testsupport.Broker, topic string, partition int, msgs ...kafka.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	txid := testsupport.UniqueName("txn")
	c := &kafka.Client{Addr: kafka.TCP(br.Addrs...), Timeout: 10 * time.Second}
	var coord *kafka.FindCoordinatorResponse
	for { // (the transaction state topic is made at the first request)
		r, err := c.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: txid, KeyType: kafka.CoordinatorKeyTypeTransaction})
		if err == nil && r.Error == nil {
			coord = r
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("transaction coordinator: %v %v", err, r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	tc := &kafka.Client{Addr: kafka.TCP(net.JoinHostPort(coord.Coordinator.Host, strconv.Itoa(coord.Coordinator.Port))), Timeout: 10 * time.Second}
	var ip *kafka.InitProducerIDResponse
	for { // (retried while the coordinator loads the transaction state)
		var err error
		ip, err = tc.InitProducerID(ctx, &kafka.InitProducerIDRequest{TransactionalID: txid, TransactionTimeoutMs: 30000})
		if err == nil && ip.Error == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("init producer id: %v %v", err, ip)
		}
		time.Sleep(200 * time.Millisecond)
	}
	pid, epoch := ip.Producer.ProducerID, ip.Producer.ProducerEpoch
	ap, err := tc.AddPartitionsToTxn(ctx, &kafka.AddPartitionsToTxnRequest{TransactionalID: txid, ProducerID: pid, ProducerEpoch: epoch,
		Topics: map[string][]kafka.AddPartitionToTxn{topic: {{Partition: partition}}}})
	if err != nil {
		t.Fatalf("add partitions to the transaction: %v", err)
	}
	for _, ps := range ap.Topics {
		for _, p := range ps {
			if p.Error != nil {
				t.Fatalf("add partitions to the transaction: %v", p.Error)
			}
		}
	}
	// A v2 record batch written by kafka-go, then given the producer's id, epoch and first
	// sequence (kafka-go writes none) and its checksum again.
	recs := make([]kafka.Record, len(msgs))
	for i, m := range msgs {
		hs := make([]kafka.Header, len(m.Headers))
		copy(hs, m.Headers)
		recs[i] = kafka.Record{Key: kafka.NewBytes(m.Key), Value: kafka.NewBytes(m.Value), Headers: hs}
	}
	var buf bytes.Buffer
	rs := protocol.RecordSet{Version: 2, Attributes: protocol.Transactional, Records: kafka.NewRecordReader(recs...)}
	if _, err := rs.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()[4:] // (after the record set's size; the batch's fields at their offsets, big-endian)
	be := binary.BigEndian
	be.PutUint64(b[43:], uint64(pid))
	be.PutUint16(b[51:], uint16(epoch))
	be.PutUint32(b[53:], 0)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	b = buf.Bytes()
	leader, err := kafka.DialLeader(ctx, "tcp", br.Addrs[0], topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	leaderAddr := leader.RemoteAddr()
	leader.Close()
	pr, err := c.RawProduce(ctx, &kafka.RawProduceRequest{Addr: leaderAddr, Topic: topic, Partition: partition, RequiredAcks: kafka.RequireAll,
		TransactionalID: txid, RawRecords: protocol.RawRecordSet{Reader: bytes.NewReader(b)}})
	if err != nil || pr.Error != nil {
		t.Fatalf("transactional produce: %v %v", err, pr)
	}
	et, err := tc.EndTxn(ctx, &kafka.EndTxnRequest{TransactionalID: txid, ProducerID: pid, ProducerEpoch: epoch, Committed: true})
	if err != nil || et.Error != nil {
		t.Fatalf("commit the transaction: %v %v", err, et)
	}
}

// TestHighestKeyVersionPastATransactionMarkerRealBroker: highestKeyVersion read each partition's
// message at end-1 only. When that offset is a transaction's commit marker, kafka-go hands the
// marker out as a message without headers: its "version" 0 was taken for the partition's (seen:
// highest 0 where 7 was published, in 465 ms), so a builder's keys' models could continue below
// the versions on the topic, and its scorers ignore them; where end-1 holds no message at all
// (compacted away) the read waits for one, the attempt's whole timeout. The version is the last
// key model message's, found at once.
func TestHighestKeyVersionPastATransactionMarkerRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	mt := testsupport.UniqueName("txn-models")
	createCompactedTopic(t, br, mt, 2)
	version := func(v int) kafka.Message {
		return kafka.Message{Key: []byte(keyModelPrefix + "k"), Value: []byte("m"),
			Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: []byte(strconv.Itoa(v))}}}
	}
	w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: mt, Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return 1 })}
	if err := w.WriteMessages(context.Background(), version(5)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	writeInTransaction(t, br, mt, 1, version(7))
	cfg := modelTopicConfig{brokers: br.Addrs, topic: mt, maxMessageBytes: 1 << 20}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	highest, parts, err := highestKeyVersion(ctx, cfg, &kafka.Dialer{Timeout: 10 * time.Second})
	took := time.Since(t0)
	t.Logf("highest %d, partitions %d, %v after %v", highest, parts, err, took.Round(time.Millisecond))
	if err != nil {
		t.Fatalf("highestKeyVersion: %v (after %v)", err, took.Round(time.Millisecond))
	}
	if highest != 7 || parts != 2 {
		t.Errorf("highest key model version %d of %d partitions, want 7 of 2", highest, parts)
	}
	if took > 5*time.Second {
		t.Errorf("highestKeyVersion took %v", took.Round(time.Millisecond))
	}
}

// TestHighestKeyVersionPastStaleTombstonesRealBroker: a builder's tombstone of a key's model of
// another configuration (keystale.go) carries that model's own version, older than the
// builder's publications, and may be the last messages of a partition. highestKeyVersion took
// the tail's newest key model message for the partition's highest version (failed first: 50
// where 100 was published before the tombstones), so a restarted builder's keys' models could
// continue below the versions on the topic where its clock is behind. Such tombstones are passed
// over: the version is that of the last message that is not one.
func TestHighestKeyVersionPastStaleTombstonesRealBroker(t *testing.T) {
	br := testsupport.RealBroker(t)
	mt := testsupport.UniqueName("stale-models")
	createCompactedTopic(t, br, mt, 2)
	w := &kafka.Writer{Addr: kafka.TCP(br.Addrs...), Topic: mt, Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return 1 })}
	defer w.Close()
	msgs := []kafka.Message{{Key: []byte(keyModelPrefix + "k"), Value: []byte("m"),
		Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: []byte("100")}}}}
	for i := range 20 { // (more than the tail's first reads: 1, then 16)
		msgs = append(msgs, kafka.Message{Key: []byte(keyModelPrefix + "old-" + strconv.Itoa(i)),
			Headers: []kafka.Header{{Key: headerKeyModelVersion, Value: []byte("50")}, {Key: headerKeyStale, Value: []byte("built for features [a]")}}})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	highest, _, err := highestKeyVersion(ctx, modelTopicConfig{brokers: br.Addrs, topic: mt, maxMessageBytes: 1 << 20}, &kafka.Dialer{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if highest != 100 {
		t.Errorf("highest key model version %d, want 100 (the stale models' tombstones, version 50, after it)", highest)
	}
}
