// Package storms holds the end-to-end tests of the storm guard (package
// storm) on a private redis-server and an in-process Kafka: a pipe outage
// upstream of the signals topic, a hold bounded by storm.max_hold, a stall
// of some partitions only, a partition too quiet to stall, and a restart
// of the stalled partitions' owner during the outage. Its one file of
// support, pipe_test.go, is a fleet whose producers can all stop at once.
package storms
