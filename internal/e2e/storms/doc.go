// Package storms holds the end-to-end tests of the storm guard (package
// storm) on a private redis-server and an in-process Kafka: a pipe outage
// upstream of the signals topic, a hold bounded by storm.max_hold, a stall
// of some partitions only, a partition too quiet to stall, and a restart
// of the stalled partitions' owner during the outage. Its one file of
// support, pipe_test.go, is a fleet whose producers can all stop at once.
//
// The fleet (4,800 heartbeats a second with 1 s timeouts) keeps each
// device's interval on a loaded machine: every slot due since its last
// write beats in the next, however long that write took. (A fleet that
// sent one slot a tick stretched its devices' intervals to several times
// 200 ms beside the fault-injection suite under -race, and its devices
// timed out on their own: deadlines within stall_after of the outage's
// start, which may fire by contract, and devices that came back more than
// a timeout after the hold ended.) Each test fails if a device of the
// fleet still went timeout - stall_after between heartbeats outside the
// outage: such a run would measure the machine, not the guard.
package storms
