package avro

import (
	"fmt"
	"math"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// HeartbeatSchema is a heartbeat as an Avro producer would write it, for
// the demos (flatline simulate and dev, --shape avro) and the tests:
// flatline's own message fields at the top, and a nested record so that
// paths such as value:meta.site have something to walk. Heartbeat is its Go form.
const HeartbeatSchema = `{
  "type": "record",
  "name": "Heartbeat",
  "namespace": "dev.flatline",
  "fields": [
    {"name": "device_id", "type": "string"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "class", "type": ["null", "string"], "default": null},
    {"name": "timeout_ms", "type": ["null", "long"], "default": null},
    {"name": "parent", "type": ["null", "string"], "default": null},
    {"name": "meta", "type": {
      "type": "record",
      "name": "Meta",
      "fields": [{"name": "site", "type": "string"}]
    }}
  ]
}`

// Heartbeat is a value of HeartbeatSchema, for Encode. A nil pointer is the
// union's null.
type Heartbeat struct {
	DeviceID  string        `avro:"device_id"`
	TS        time.Time     `avro:"ts"`
	Class     *string       `avro:"class"`
	TimeoutMs *int64        `avro:"timeout_ms"`
	Parent    *string       `avro:"parent"`
	Meta      HeartbeatMeta `avro:"meta"`
}

// HeartbeatMeta is HeartbeatSchema's nested record.
type HeartbeatMeta struct {
	Site string `avro:"site"`
}

// ParseSchema parses an Avro schema on its own: named types it defines
// are not remembered for the next schema parsed, as they would be by
// hamba's Parse, which keeps them in a package-level cache.
func ParseSchema(text string) (hamba.Schema, error) {
	return hamba.ParseWithCache(text, "", &hamba.SchemaCache{})
}

// Encode writes v with schema in the wire format under schemaID: byte 0,
// the id in 4 bytes big-endian, then v in Avro's binary encoding (hamba's
// Marshal: a Go struct with avro tags, or a map[string]any).
func Encode(schemaID int, schema hamba.Schema, v any) ([]byte, error) {
	if schemaID < 0 || schemaID > math.MaxUint32 {
		return nil, fmt.Errorf("schema id %d does not fit the wire format's 4 bytes", schemaID)
	}
	b, err := new(sr.ConfluentHeader).AppendEncode(make([]byte, 0, 64), schemaID, nil)
	if err != nil {
		return nil, err
	}
	body, err := hamba.Marshal(schema, v)
	if err != nil {
		return nil, fmt.Errorf("encode with schema %d: %w", schemaID, err)
	}
	return append(b, body...), nil
}
