// Package maintenance holds the end-to-end tests of maintenance windows
// (package maintenance) on a private redis-server and an in-process Kafka,
// events read back by an independent franz-go client: a prefix window
// during which some devices reboot, some die and some beat through; a
// class window; a one-device window ended early; an instance restarted
// mid-window; devices no window matches; and the limits refused. Its
// support, beater_test.go, is a fleet whose devices fall silent for a span
// and may come back.
package maintenance
