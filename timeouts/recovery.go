package timeouts

// Recovery is a device that beat again after its timeout fired: ingest
// finds it when it writes the heartbeat, dispatch publishes it as a
// recovered event.
type Recovery struct {
	DeviceID string
	// DownSinceMs is the deadline_ms of the timeout the recovery ends.
	DownSinceMs int64
	// SeenAtMs is the time of the heartbeat that ended the silence.
	SeenAtMs int64
}
