// Package storms holds the end-to-end tests of the storm guard (package
// storm) on a private redis-server and an in-process Kafka: a pipe outage
// upstream of the signals topic, a hold bounded by storm.max_hold, a stall
// of some partitions only, a partition too quiet to stall, and a restart
// of the stalled partitions' owner during the outage. Its one file of
// support, pipe_test.go, is a fleet whose producers can all stop at once.
//
// `make test` runs this package alone. Run beside the fault-injection
// suite under -race on two cores, the guard has been seen to let the
// whole fleet fire during an outage although every partition's stall was
// detected in time (a CI run at f98e5cb): an open problem, not yet
// explained; alone, the tests pass.
package storms
