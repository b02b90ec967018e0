package timeouts

// Kin is what a device's timeout says of its family (SPEC §14): the
// scanner finds it, dispatch writes it into the event.
type Kin struct {
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
}
