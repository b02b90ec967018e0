// Package pipeline holds the end-to-end tests of one or more in-process
// instances (app.New + Run) on a private redis-server and an in-process
// Kafka: the fleet's timeouts exactly once with every field right, events
// across classes and overrides, recovered events, a reset racing its
// timeout, leases spreading over instances, a restart after a gap, and
// scaling the shards under load. It has no code of its own.
package pipeline
