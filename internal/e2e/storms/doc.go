// Package storms holds the end-to-end tests of the storm guard (package
// storm) on a private redis-server and an in-process Kafka: a pipe outage
// upstream of the signals topic, a hold bounded by storm.max_hold, a stall
// of some partitions only, a partition too quiet to stall, and a restart
// of the stalled partitions' owner during the outage. Its one file of
// support, pipe_test.go, is a fleet whose producers can all stop at once.
//
// `make test` runs this package alone. Beside the fault-injection suite
// under -race on two cores, the tests' own fleet (8,000 heartbeats a second
// with 1 s timeouts) falls more than a timeout behind: its devices time
// out before the outage (a run at 22b4b11 declared a storm of 524 such
// timeouts before the pipe broke) and after it, as it takes longer than a
// timeout to send its first round again. byType counts only silences from
// the outage on; what remains under that load is not yet told apart from
// a fault of the guard's.
package storms
