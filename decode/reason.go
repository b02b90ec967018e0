package decode

// Reason is an invalid-message reason code (the README's "Messages" and
// "Real sources"), used as the flatline-reason dead-letter header and as a
// metric label.
type Reason string

// The reason codes. When a message has several faults it gets the first
// that applies, in this order: the id checks (no_key, no_device_id,
// key_too_long, key_not_utf8, for an id from the key or a header),
// too_large, then not_object, trailing_data, bad_payload, the id checks for
// an id from the value, bad_type, bad_ts, id_mismatch and unknown_class.
const (
	// ReasonNotObject: not JSON, JSON that is not an object (including
	// null), malformed JSON inside the object, or nesting deeper than 64;
	// in format avro, a wrong magic byte or a body that does not decode
	// with its schema.
	ReasonNotObject Reason = "not_object"
	// ReasonTrailingData: a valid object followed by more than whitespace.
	ReasonTrailingData Reason = "trailing_data"
	// ReasonBadType: a known field of the wrong type.
	ReasonBadType Reason = "bad_type"
	// ReasonBadTS: a time that does not parse: a string neither RFC 3339
	// nor a decimal number, or a number outside the int64 range of ms.
	ReasonBadTS Reason = "bad_ts"
	// ReasonNoKey: a missing or empty Kafka key, where the id is the key.
	ReasonNoKey Reason = "no_key"
	// ReasonKeyTooLong: a device id over 256 bytes.
	ReasonKeyTooLong Reason = "key_too_long"
	// ReasonKeyNotUTF8: a device id that is not valid UTF-8.
	ReasonKeyNotUTF8 Reason = "key_not_utf8"
	// ReasonIDMismatch: the value's device_id differs from the key.
	ReasonIDMismatch Reason = "id_mismatch"
	// ReasonTooLarge: a value over ingest.max_value_bytes.
	ReasonTooLarge Reason = "too_large"
	// ReasonUnknownClass: a class that is not configured, with
	// timeouts.strict_classes.
	ReasonUnknownClass Reason = "unknown_class"
	// ReasonNoDeviceID: ingest.from.device_id found nothing: no such
	// header, member or payload member, an empty one, a key:<regex> that
	// does not match, or a path through something that is not an object.
	ReasonNoDeviceID Reason = "no_device_id"
	// ReasonBadPayload: ingest.payload's member is missing, not a string,
	// or does not decode (ingest.payload_encoding) to a JSON object.
	ReasonBadPayload Reason = "bad_payload"
	// ReasonUnknownSchema: in format avro, a schema id the registry does
	// not know (it answered 404).
	ReasonUnknownSchema Reason = "unknown_schema"
)

// AllReasons lists every reason, for metrics pre-registration and tests.
var AllReasons = []Reason{
	ReasonNotObject, ReasonTrailingData, ReasonBadType, ReasonBadTS,
	ReasonNoKey, ReasonKeyTooLong, ReasonKeyNotUTF8, ReasonIDMismatch,
	ReasonTooLarge, ReasonUnknownClass, ReasonNoDeviceID, ReasonBadPayload,
	ReasonUnknownSchema,
}
