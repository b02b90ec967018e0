// Package maintenance keeps planned silence from paging anyone.
//
// Operators open a window before firmware roll-outs, site power work or
// shipping (`flatline maintenance start`): it matches listed devices, a
// class or an id prefix, from now until a time. Windows live in Redis
// under the key prefix (shard/maintenance.go), so every instance applies
// them, they survive restarts and they end by themselves.
//
//   - The Room (room.go) is every instance's in-memory view of the windows:
//     loaded before the instance fires anything, reloaded within a second
//     of a start or an end (it polls a version counter the scripts move),
//     and indexed (index.go) so that a due device's lookup costs a few map
//     reads however many windows are open.
//   - Matching happens only when a deadline passes (scanner/maintain.go),
//     never per heartbeat: a matching device is parked at its window's
//     end instead of firing; at the end it gets its own timeout from there,
//     and fires a timeout carrying "maintenance_id" if it stays silent.
//     A heartbeat meanwhile moves it on (ZADD GT) and nothing fires.
//   - End (end.go) ends a window early and brings the deadlines it parked
//     back to the actual end + their timeout.
//
// Those timeouts do not count toward storms (package storm): the silence
// was planned.
package maintenance
