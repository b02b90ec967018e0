// Package decode reads heartbeats in the shapes fleets write them: the
// native JSON object (the README's "Messages"), and the records of MQTT
// bridges, IoT hubs and connectors (the README's "Real sources").
//
// A Decoder is built from the ingest section's expressions (From: where
// each field comes from) and turns one Kafka record (Message) into a
// Heartbeat or an invalid-message Reason. Its files, in the order a record
// is read:
//
//   - source.go parses the ingest.from expressions (key, key:<regex>,
//     header:<name>, value:<path>, payload:<path>, kafka);
//   - decode.go is the decoder: the device id first (from the key or a
//     header it is checked before the value is read), then the value, the
//     payload embedded in it, and the fields' type and value rules;
//   - jsonscan.go locates the members a plan names in a JSON document in
//     one pass, without allocating or building a tree; rfc3339.go and
//     times.go read times (RFC 3339, and numbers by their magnitude);
//   - header.go finds a header in a record's header section where it lies,
//     and decodes AMQP-typed values (Azure IoT Hub);
//   - avro.go reads Avro values through decode/avro.
//
// The native shape's path allocates nothing per heartbeat but a new
// device's id string (BenchmarkDecode, TestDecodeReusesHeartbeat).
package decode
