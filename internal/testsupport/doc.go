// Package testsupport holds the helpers that tests of several packages share, so that no test
// copies them: a Kafka to run against (the real broker of KAFKA_BOOTSTRAP, or an in-process
// kfake cluster), topic creation, producing and reading topics back with franz-go (a client
// independent of the kafka-go code under test), group offsets, and scraping a Prometheus
// endpoint. Only tests import it (its files are not _test.go files so that other packages'
// tests can): nothing in the product depends on it.
//
// Its subpackages keep the tests that need only one thing from linking the rest:
//   - testbatch: batches built on the real batch schema. It imports stages/ingest for the
//     schema, and ingest's own tests import this package, so the two cannot be one package
//     until the schema moves below ingest (then testbatch can fold in here).
//   - testcols: feature columns for the algorithm and kernel tests (uniform, Gaussian blobs).
//   - cputime: the process's CPU time, for benchmarks on a shared machine.
package testsupport
