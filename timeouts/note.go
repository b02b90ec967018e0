package timeouts

// Note is what a device's event says besides a plain timeout: its family
// (SPEC §14) and the maintenance window that released it (§15). The
// scanner finds it, dispatch writes it into the event.
type Note struct {
	// Parent is the device's gateway ("parent"), "" when it has none.
	Parent string
	// Unreachable: the device's parent is down, so its silence is
	// published as an unreachable event, not a timeout.
	Unreachable bool
	// Gateway: some child named the device as its parent, so its event
	// carries ChildrenHeld ("children_held"), 0 included.
	Gateway      bool
	ChildrenHeld int64
	// Held: the device waited for its parent past its deadline, so the
	// time from its deadline to its event measures its parent's silence,
	// not flatline: it stays out of the detection lateness.
	Held bool
	// MaintenanceID: the device was held by this maintenance window and
	// stayed silent past its end ("maintenance_id"); such a timeout
	// carries no storm_id and does not count toward storms.
	MaintenanceID string
}
