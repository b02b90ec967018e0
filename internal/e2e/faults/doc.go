// Package faults holds flatline's fault-injection tests (issue #6): a
// `serve` process killed with SIGKILL under load, Redis and Kafka outages,
// a corpus of invalid heartbeats, the memory bound of one instance as the
// number of devices grows, and the binary's handling of secrets. Each runs against a real redis-server and an
// in-process Kafka (kfake) reached over TCP, and checks SPEC §3's promises:
// nothing lost, nothing false, no crash.
//
// The package has no non-test code; the shared helpers live in
// helpers_test.go.
package faults
