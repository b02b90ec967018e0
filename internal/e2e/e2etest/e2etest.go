// Package e2etest is the one harness of the end-to-end suites under
// internal/e2e: an environment (a private redis-server, an in-process Kafka
// and a configuration pointing at them), in-process instances whose log is
// kept for the report of a failed test, a fleet that beats into the signals
// topic, a collector of the timeouts topic, the verdict that exactly the
// silent devices got their timeout with every field right, Eventually,
// the one way a test waits for a condition, and Metrics, a /metrics page
// read with Prometheus' own parser; and Scenario, the shape of a
// fleet test (devices, silences, rhythm, timeout, partitions, shards) with
// the one set-up of such a test (Scenario.Start: environment, instance,
// collector; Run.StartFleet, Run.Finish). Tests only.
//
// The real servers themselves are started by internal/testenv, which the
// unit tests of the stages share.
package e2etest

// Topic names the suites use.
const (
	Signals  = "device-signals"
	Timeouts = "device-timeouts"
	DLQ      = "device-signals-dlq"
)

// Topics are the three topics an instance needs, for testenv.Kafka.
var Topics = []string{Signals, Timeouts, DLQ}
