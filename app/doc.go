// Package app is the composition root of `flatline serve`: New connects to
// Redis and Kafka, failing fast with one clear error when either cannot be
// reached, and builds every stage the configured roles ask for; Run runs
// them until its context is cancelled or one of them fails.
//
// It sits above every stage: it imports them all, and nothing but the
// commands (cmd/flatline), the demo (app/demo), the benchmarks and the
// end-to-end tests imports it. Every callback one part makes into another
// is a typed field of the callee's Options, set in app.go where both are
// built.
//
// Files by job:
//   - app.go: the App and New, which builds the stages;
//   - connect.go: the Redis client and scripts, the Kafka check, the
//     timeout policy (shared with the inspecting commands of cmd/flatline);
//   - lifecycle.go: Run, Close and the stop order, declared once in stages;
//   - status.go: /readyz and /status;
//   - clustermetrics.go: the gauges of shared state refreshed per scrape.
//
// Every long-running part has the same contract, Run(ctx) error returning
// once ctx is cancelled, so the lifecycle treats them alike: it groups them
// into stages, starts the stages in the reverse of their stop order and
// stops them one after the other, which is what makes a shutdown lose
// nothing and fire nothing twice.
package app
