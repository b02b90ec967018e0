// Package gateways holds the end-to-end tests of gateways (SPEC §14) on a
// private redis-server and an in-process Kafka: gateways dying with their
// children (one alarm per gateway, its children unreachable), a child
// dying alone under a live gateway, a gateway silent for less than its
// own timeout, a gateway back after its timeout with some of its children
// lost; a dead gateway's held children across a restart and a doubling of
// the shards, and on a 3-master Redis Cluster. Its one file of support, family_test.go, is a fleet of
// gateways and children that the test silences and brings back.
//
// Timeouts are short (children 2 s, gateways 4 s, every device beating
// every 400 ms) and storm.max_hold is 0: the tests silence a busy fleet on
// purpose, which the storm guard would otherwise take for a dead pipe.
package gateways
