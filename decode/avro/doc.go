// Package avro reads heartbeats written as Avro in the schema registry's
// wire format (ingest.format avro): byte 0, a 4-byte big-endian
// schema id, then the record in Avro's binary encoding.
//
// A Registry fetches schemas by id from a Confluent-compatible registry
// (franz-go's sr client); a Decoder keeps each schema for the life of the
// process, since a registry never changes the schema of an id, and decodes
// values with hamba/avro into a Record that Lookup walks by field names.
//
// Decode's errors tell the caller what to do with the record: ErrBadWire
// (not the wire format, or a body its schema does not read: invalid,
// reason not_object), ErrUnknownSchema (the registry does not know the id:
// invalid, reason unknown_schema; asked again for the next record, since
// the schema may be registered later) and ErrUnavailable (the registry did
// not answer: an outage, not bad input; hold the partition and retry).
package avro
