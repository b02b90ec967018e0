// Package ops holds end-to-end tests of what an operator looks at: the
// status page rendered by a real browser (headless Chromium) against a
// running instance, and the Grafana dashboard and Prometheus alert rules in
// deploy/ checked against the metrics a running instance exports. It has no
// code of its own.
package ops
