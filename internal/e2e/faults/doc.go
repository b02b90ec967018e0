// Package faults holds flatline's fault-injection tests: a
// `serve` process killed with SIGKILL under load, Redis and Kafka outages,
// a corpus of invalid heartbeats, the memory bound of one instance as the
// number of devices grows, and the binary's handling of secrets. Each runs against a real redis-server and an
// in-process Kafka (kfake) reached over TCP, and checks the contract's promises (docs/design.md):
// nothing lost, nothing false, no crash.
//
// The package has no non-test code. The harness it shares with the other
// end-to-end suites (instances, the fleet, the collector and the verdict,
// Eventually) is internal/e2e/e2etest; what only fault tests need lives
// here: real `flatline serve` processes (proc_test.go), a workaround for
// group members kfake never expires (ghosts_test.go), and the load, the
// replayable random seeds and the poller the tests share (harness_test.go).
package faults
