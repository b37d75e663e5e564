package kafkasec_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/outlierd/outlierd/internal/core/batch"
	"github.com/outlierd/outlierd/internal/core/checkpoint"
	"github.com/outlierd/outlierd/internal/core/kafkasec"
	"github.com/outlierd/outlierd/internal/testsupport"
	"github.com/outlierd/outlierd/stages/ingest"
	"github.com/outlierd/outlierd/stages/sink"
)

// The integration tests run against the secured listeners that `KAFKA_SECURITY=1
// .ci/kafka.sh start` adds to the test broker (.ci/with-kafka.sh, and so `make test`, starts it
// that way): SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; the broker's certificate is signed
// by a throw-away CA) and SSL requiring a client certificate. Without that broker they skip.

// secureBroker is what kafka.sh exported for the secured listeners.
type secureBroker struct {
	saslSSL, mtls      string // bootstrap addresses
	ca, cert, key      string // PEM files
	username, password string
}

func secureEnv(t *testing.T) secureBroker {
	t.Helper()
	b := secureBroker{
		saslSSL: os.Getenv("KAFKA_SASL_SSL_BOOTSTRAP"), mtls: os.Getenv("KAFKA_MTLS_BOOTSTRAP"),
		ca: os.Getenv("KAFKA_TLS_CA"), cert: os.Getenv("KAFKA_TLS_CLIENT_CERT"), key: os.Getenv("KAFKA_TLS_CLIENT_KEY"),
		username: os.Getenv("KAFKA_SASL_USERNAME"), password: os.Getenv("KAFKA_SASL_PASSWORD"),
	}
	if b.saslSSL == "" || b.mtls == "" || b.ca == "" || b.cert == "" || b.key == "" || b.username == "" || b.password == "" {
		t.Skip("no secured broker: start one with `KAFKA_SECURITY=1 .ci/kafka.sh start` and export what it prints (KAFKA_SASL_SSL_BOOTSTRAP, KAFKA_TLS_CA, ...)")
	}
	return b
}

// variant is one way of connecting securely.
type variant struct {
	name      string
	bootstrap string
	sec       kafkasec.Config
}

func (b secureBroker) variants() []variant {
	tlsCA := kafkasec.TLS{Enabled: true, CAFile: b.ca}
	sasl := func(m string) kafkasec.SASL {
		return kafkasec.SASL{Mechanism: m, Username: b.username, Password: kafkasec.NewSecret(b.password)}
	}
	return []variant{
		{"SASL_SSL PLAIN", b.saslSSL, kafkasec.Config{TLS: tlsCA, SASL: sasl(kafkasec.MechanismPlain)}},
		{"SASL_SSL SCRAM-SHA-256", b.saslSSL, kafkasec.Config{TLS: tlsCA, SASL: sasl(kafkasec.MechanismSCRAMSHA256)}},
		{"SASL_SSL SCRAM-SHA-512", b.saslSSL, kafkasec.Config{TLS: tlsCA, SASL: sasl(kafkasec.MechanismSCRAMSHA512)}},
		{"SSL client certificate", b.mtls, kafkasec.Config{TLS: kafkasec.TLS{Enabled: true, CAFile: b.ca, CertFile: b.cert, KeyFile: b.key}}},
	}
}

// createTopics creates the topics (1 partition each) through a client using sec's Transport.
func createTopics(t *testing.T, bootstrap string, sec kafkasec.Config, topics ...string) {
	t.Helper()
	tr, err := sec.Transport()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(bootstrap), Transport: tr, Timeout: 20 * time.Second}
	req := &kafka.CreateTopicsRequest{}
	for _, tp := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: tp, NumPartitions: 1, ReplicationFactor: 1})
	}
	res, err := cl.CreateTopics(ctx, req)
	if err != nil {
		t.Fatalf("create topics over %s: %v", bootstrap, err)
	}
	for tp, err := range res.Errors {
		if err != nil {
			t.Fatalf("create topic %s: %v", tp, err)
		}
	}
}

// TestSecureSourceAndSink produces, consumes and commits through the pipeline's own sink and
// source over each secured connection: the sink (kafka.Writer on kafkasec's Transport) writes
// the input records, the source (consumer group and partition fetches on kafkasec's Dialer) reads and
// decodes them and commits their offsets, the sink writes one output per record, and a reader
// on the Dialer reads the outputs back. The source's log is checked for the password.
func TestSecureSourceAndSink(t *testing.T) {
	b := secureEnv(t)
	for _, v := range b.variants() {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			testSecureFlow(t, b, v)
		})
	}
}

func testSecureFlow(t *testing.T, b secureBroker, v variant) {
	const n = 40
	suffix := fmt.Sprintf("%s-%d", strings.NewReplacer(" ", "-", "_", "-").Replace(strings.ToLower(v.name)), time.Now().UnixNano())
	in, out, dead := "outlierd-sec-in-"+suffix, "outlierd-sec-out-"+suffix, "outlierd-sec-dead-"+suffix
	createTopics(t, v.bootstrap, v.sec, in, out, dead)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// 1. The inputs, written by a sink (as dead letters to the input topic: WriteDeadLetters
	// writes raw values, which is what a producer of sensor records sends).
	prodCfg := sink.Default()
	prodCfg.Brokers, prodCfg.Topic, prodCfg.DeadLetterTopic, prodCfg.Security = []string{v.bootstrap}, dead, in, v.sec
	prod, err := sink.New(prodCfg)
	if err != nil {
		t.Fatal(err)
	}
	inputs := make([]batch.DeadLetter, n)
	for i := range inputs {
		inputs[i] = batch.DeadLetter{Topic: "producer", Offset: int64(i), Value: []byte(fmt.Sprintf(`{"a": %d, "b": %d}`, i, 2*i)), Time: time.Now()}
	}
	if err := prod.WriteDeadLetters(ctx, inputs); err != nil {
		t.Fatalf("write the inputs: %v", err)
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}

	// 2. The source reads them through a consumer group.
	var logs testsupport.LogBuffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel)
	srcCfg := ingest.Default()
	srcCfg.Brokers, srcCfg.Topic, srcCfg.GroupID, srcCfg.Security = []string{v.bootstrap}, in, "outlierd-sec-"+suffix, v.sec
	srcCfg.Features, srcCfg.BatchSize, srcCfg.MaxWait = []string{"a", "b"}, n, 200*time.Millisecond
	srcCfg.HeartbeatInterval, srcCfg.SessionTimeout = 500*time.Millisecond, 6*time.Second
	cp := checkpoint.New()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src, err := ingest.NewSource(srcCfg, cp, mem, log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := src.Close(); err != nil {
			t.Errorf("close source: %v", err)
		}
		if leaks(logs.String(), b.password) {
			t.Errorf("the source's log holds the password:\n%s", logs.String())
		}
	}()
	outCfg := sink.Default()
	outCfg.Brokers, outCfg.Topic, outCfg.DeadLetterTopic, outCfg.Security = []string{v.bootstrap}, out, dead, v.sec
	outCfg.Emit = sink.EmitAll
	snk, err := sink.New(outCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()

	seen := map[float32]bool{}
	for len(seen) < n {
		bt, dls, err := src.Next(ctx)
		if err != nil {
			t.Fatalf("source next after %d records: %v", len(seen), err)
		}
		if dls.Len() > 0 {
			t.Fatalf("dead letters: %+v", dls.All())
		}
		if bt == nil {
			continue
		}
		as, bs := bt.Record.Column(0), bt.Record.Column(1)
		for i := 0; i < bt.Len(); i++ {
			a, bv := as.(interface{ Value(int) float32 }).Value(i), bs.(interface{ Value(int) float32 }).Value(i)
			if bv != 2*a || seen[a] {
				t.Fatalf("record %d: a=%v b=%v (want b = 2a, each a once)", i, a, bv)
			}
			seen[a] = true
		}
		// 3. The sink writes one output per record (emit: all, unscored); then the offsets are done.
		if err := snk.Write(ctx, bt); err != nil {
			t.Fatalf("sink write: %v", err)
		}
		bt.Ack()
		bt.Release()
	}
	committed, err := src.Commit(ctx)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if committed[0] != n {
		t.Errorf("committed %v, want partition 0 at %d", committed, n)
	}

	// 4. The outputs, read back over the same kind of connection.
	d, err := v.sec.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{v.bootstrap}, Topic: out, Partition: 0, Dialer: d, MaxWait: time.Second})
	defer r.Close()
	var ids []string
	for len(ids) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read outputs after %d: %v", len(ids), err)
		}
		for _, h := range m.Headers {
			if h.Key == sink.HeaderID {
				ids = append(ids, string(h.Value))
			}
		}
	}
	sort.Strings(ids)
	for i := 0; i < n; i++ {
		want := fmt.Sprintf("%s/0/%d", in, i)
		if j := sort.SearchStrings(ids, want); j == len(ids) || ids[j] != want {
			t.Fatalf("output %s missing from %d outputs", want, len(ids))
		}
	}
}

// TestSecureRefusals checks that the secured listeners refuse what they should (a wrong
// password, for each mechanism; no client certificate; an unknown CA), that the errors say so,
// and that neither the errors nor the source's log hold the right or the wrong password.
func TestSecureRefusals(t *testing.T) {
	b := secureEnv(t)
	const wrong = "not-the-password-5f3a9c"
	tlsCA := kafkasec.TLS{Enabled: true, CAFile: b.ca}
	cases := []struct {
		name, bootstrap string
		sec             kafkasec.Config
		want            string // in the client's error
	}{
		{"wrong PLAIN password", b.saslSSL, kafkasec.Config{TLS: tlsCA, SASL: kafkasec.SASL{Mechanism: "plain", Username: b.username, Password: kafkasec.NewSecret(wrong)}}, "SASL Authentication failed"},
		{"wrong SCRAM-SHA-256 password", b.saslSSL, kafkasec.Config{TLS: tlsCA, SASL: kafkasec.SASL{Mechanism: "scram-sha-256", Username: b.username, Password: kafkasec.NewSecret(wrong)}}, "SASL Authentication failed"},
		{"unknown SCRAM-SHA-512 user", b.saslSSL, kafkasec.Config{TLS: tlsCA, SASL: kafkasec.SASL{Mechanism: "scram-sha-512", Username: "nobody", Password: kafkasec.NewSecret(b.password)}}, "SASL Authentication failed"},
		{"no client certificate", b.mtls, kafkasec.Config{TLS: tlsCA}, ""},
		{"broker CA not trusted", b.saslSSL, kafkasec.Config{TLS: kafkasec.TLS{Enabled: true}, SASL: kafkasec.SASL{Mechanism: "scram-sha-256", Username: b.username, Password: kafkasec.NewSecret(b.password)}}, "certificate signed by unknown authority"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tr, err := tc.sec.Transport()
			if err != nil {
				t.Fatal(err)
			}
			defer tr.CloseIdleConnections()
			cl := &kafka.Client{Addr: kafka.TCP(tc.bootstrap), Transport: tr, Timeout: 10 * time.Second}
			_, cerr := cl.Metadata(ctx, &kafka.MetadataRequest{})
			if cerr == nil {
				t.Fatal("the broker accepted the client")
			}
			if !strings.Contains(cerr.Error(), tc.want) {
				t.Errorf("client error %q, want %q", cerr, tc.want)
			}

			// Through the stages: the sink's write fails, the source's fetch fails (logging the
			// retries), and neither says a password.
			sc := sink.Default()
			sc.Brokers, sc.Topic, sc.DeadLetterTopic, sc.Security = []string{tc.bootstrap}, "outlierd-sec-refused", "outlierd-sec-refused-dl", tc.sec
			sc.MaxAttempts, sc.WriteTimeout = 1, 5*time.Second
			snk, err := sink.New(sc)
			if err != nil {
				t.Fatal(err)
			}
			werr := snk.WriteDeadLetters(ctx, []batch.DeadLetter{{Topic: "x", Value: []byte("{}")}})
			snk.Close()
			if werr == nil {
				t.Error("the sink wrote through a refused connection")
			}
			var logs testsupport.LogBuffer
			ic := ingest.Default()
			ic.Brokers, ic.Topic, ic.GroupID, ic.Features, ic.Security = []string{tc.bootstrap}, "outlierd-sec-refused", "outlierd-sec-refused", []string{"a"}, tc.sec
			src, err := ingest.NewSource(ic, checkpoint.New(), memory.DefaultAllocator, zerolog.New(&logs).Level(zerolog.DebugLevel))
			if err != nil {
				t.Fatal(err)
			}
			nctx, ncancel := context.WithTimeout(ctx, 3*time.Second)
			_, _, nerr := src.Next(nctx)
			ncancel()
			src.Close()
			if nerr == nil {
				t.Error("the source fetched through a refused connection")
			}
			for _, o := range []string{cerr.Error(), fmt.Sprint(werr), fmt.Sprint(nerr), logs.String()} {
				if leaks(o, wrong) || leaks(o, b.password) {
					t.Errorf("a password leaked: %s", o)
				}
			}
			if !strings.Contains(logs.String(), tc.want) {
				// The refusal reaches the log (kafka-go's error logger), or the operator would not
				// know why nothing is consumed.
				t.Errorf("the source's log does not say %q:\n%s", tc.want, logs.String())
			}
		})
	}
}
