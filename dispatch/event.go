package dispatch

import (
	"strconv"
	"unicode/utf8"
)

// Event types, the "type" field of an event.
const (
	TypeTimeout   = "timeout"
	TypeRecovered = "recovered"
	// TypeUnreachable is the silence of a device whose parent is down
	// (SPEC §14): published instead of its timeout, with the same
	// event_id.
	TypeUnreachable = "unreachable"
	// TypeStorm covers storm_started and storm_ended: published by the
	// storm guard, not counted as timeouts.
	TypeStorm = "storm"
)

// Event is an event of the timeouts topic (the README's "Messages"). Decode one with
// encoding/json; encode one with json.Marshal, whose MarshalJSON writes
// exactly the fields of its Type in the documented order (appendJSON).
type Event struct {
	Type     string `json:"type"`
	DeviceID string `json:"device_id"`

	// Parent is the gateway of the device of a timeout or unreachable
	// event, when it has one.
	Parent string `json:"parent,omitempty"`

	// Timeout (and unreachable) events.
	LastSeenMs   int64  `json:"last_seen_ms,omitempty"`
	DeadlineMs   int64  `json:"deadline_ms,omitempty"`
	DetectedAtMs int64  `json:"detected_at_ms,omitempty"`
	TimeoutMs    int64  `json:"timeout_ms,omitempty"`
	Class        string `json:"class,omitempty"`
	Shard        int    `json:"shard,omitempty"`
	// StormID names the storm a timeout belongs to (and the storm of a
	// storm_started or storm_ended event).
	StormID string `json:"storm_id,omitempty"`
	// ChildrenHeld is, on the timeout of a device named as a parent, how
	// many of its children were held when it was detected (0 included).
	ChildrenHeld *int64 `json:"children_held,omitempty"`
	// MaintenanceID names the maintenance window a timeout's device was
	// held by: it stayed silent past the window's end (package
	// maintenance).
	MaintenanceID string `json:"maintenance_id,omitempty"`

	// Storm events (storm_started, storm_ended; key storm/<storm_id>),
	// published by the storm guard (package storm).
	StartedAtMs int64 `json:"started_at_ms,omitempty"`
	EndedAtMs   int64 `json:"ended_at_ms,omitempty"`
	Devices     int64 `json:"devices,omitempty"`
	TimedOut    int64 `json:"timed_out,omitempty"`
	Recovered   int64 `json:"recovered,omitempty"`

	// Recovered events.
	DownSinceMs int64 `json:"down_since_ms,omitempty"`
	SeenAtMs    int64 `json:"seen_at_ms,omitempty"`
	DownForMs   int64 `json:"down_for_ms,omitempty"`

	EventID string `json:"event_id"`
}

// appendJSON appends the event's JSON to dst. The event_id is derived from
// the other fields, so EventID is ignored. An unknown Type encodes as a
// timeout. (Storm events are encoded by package storm.)
func (e Event) appendJSON(dst []byte) []byte {
	if e.Type == TypeRecovered {
		return appendRecovered(dst, e.DeviceID, e.DownSinceMs, e.SeenAtMs)
	}
	x := extras{parent: e.Parent, stormID: e.StormID, maintenanceID: e.MaintenanceID}
	if e.Type == TypeUnreachable {
		x.typ = TypeUnreachable
	}
	if e.ChildrenHeld != nil {
		x.gateway, x.childrenHeld = true, *e.ChildrenHeld
	}
	return appendTimeout(dst, e.DeviceID, e.LastSeenMs, e.DeadlineMs, e.DetectedAtMs, e.TimeoutMs, e.Class, e.Shard, x)
}

// MarshalJSON makes json.Marshal produce the wire format.
func (e Event) MarshalJSON() ([]byte, error) { return e.appendJSON(nil), nil }

// TimeoutEventID is the event_id of the timeout of deviceID at deadlineMs.
func TimeoutEventID(deviceID string, deadlineMs int64) string {
	return deviceID + "/" + strconv.FormatInt(deadlineMs, 10)
}

// recoveredEventID is the event_id of the recovery of deviceID seen at seenAtMs.
func recoveredEventID(deviceID string, seenAtMs int64) string {
	return deviceID + "/" + strconv.FormatInt(seenAtMs, 10) + "/r"
}

// extras is what a timeout or unreachable event says besides a plain
// timeout's fields: its type ("" is timeout), its device's family (SPEC
// §14), its storm, the maintenance window that released it (§15).
type extras struct {
	typ, parent, stormID, maintenanceID string
	gateway                             bool
	childrenHeld                        int64
}

// appendTimeout appends the JSON of a timeout (or unreachable) event:
// "parent" after device_id, "children_held" after shard, then storm_id and
// maintenance_id, each only when there is one, and the event_id.
func appendTimeout(dst []byte, id string, lastSeenMs, deadlineMs, detectedAtMs, timeoutMs int64, class string, shard int, x extras) []byte {
	typ := x.typ
	if typ == "" {
		typ = TypeTimeout
	}
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","device_id":"`...)
	dst = appendEscaped(dst, id)
	dst = append(dst, '"')
	dst = appendString(dst, `,"parent":"`, x.parent)
	dst = append(dst, `,"last_seen_ms":`...)
	dst = strconv.AppendInt(dst, lastSeenMs, 10)
	dst = append(dst, `,"deadline_ms":`...)
	dst = strconv.AppendInt(dst, deadlineMs, 10)
	dst = append(dst, `,"detected_at_ms":`...)
	dst = strconv.AppendInt(dst, detectedAtMs, 10)
	dst = append(dst, `,"timeout_ms":`...)
	dst = strconv.AppendInt(dst, timeoutMs, 10)
	dst = appendString(dst, `,"class":"`, class)
	dst = append(dst, `,"shard":`...)
	dst = strconv.AppendInt(dst, int64(shard), 10)
	if x.gateway {
		dst = append(dst, `,"children_held":`...)
		dst = strconv.AppendInt(dst, x.childrenHeld, 10)
	}
	dst = appendString(dst, `,"storm_id":"`, x.stormID)
	dst = appendString(dst, `,"maintenance_id":"`, x.maintenanceID)
	dst = append(dst, `,"event_id":"`...)
	dst = appendEscaped(dst, id)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, deadlineMs, 10)
	return append(dst, `"}`...)
}

// appendString appends field (its name, colon and opening quote) and v,
// escaped and closed, when v is not empty.
func appendString(dst []byte, field, v string) []byte {
	if v == "" {
		return dst
	}
	dst = append(dst, field...)
	dst = appendEscaped(dst, v)
	return append(dst, '"')
}

// appendRecovered is the encoder of a recovered event.
func appendRecovered(dst []byte, id string, downSinceMs, seenAtMs int64) []byte {
	dst = append(dst, `{"type":"recovered","device_id":"`...)
	dst = appendEscaped(dst, id)
	dst = append(dst, `","down_since_ms":`...)
	dst = strconv.AppendInt(dst, downSinceMs, 10)
	dst = append(dst, `,"seen_at_ms":`...)
	dst = strconv.AppendInt(dst, seenAtMs, 10)
	dst = append(dst, `,"down_for_ms":`...)
	dst = strconv.AppendInt(dst, seenAtMs-downSinceMs, 10)
	dst = append(dst, `,"event_id":"`...)
	dst = appendEscaped(dst, id)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, seenAtMs, 10)
	return append(dst, `/r"}`...)
}

const hexDigits = "0123456789abcdef"

// noEscape marks the ASCII bytes that appear verbatim inside a JSON string.
// It matches encoding/json with HTML escaping on (<, > and & are escaped),
// so an event is byte-identical to what encoding/json would write and safe
// to embed anywhere a consumer might paste it.
var noEscape = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range `"\<>&` {
		t[b] = false
	}
	return t
}()

// appendEscaped appends s escaped as the inside of a JSON string (without
// quotes). Invalid UTF-8 becomes U+FFFD, and U+2028/U+2029 are escaped for
// JavaScript consumers, as encoding/json does.
func appendEscaped(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if noEscape[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}
