package rebalance

// Ensure for the external tests.
var Ensure = ensure
