package simulate

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// Shape is how the simulated heartbeats are written: flatline's own shape,
// or as a bridge writes them (the README's "Real sources"), so that a user
// can see flatline read a shape before pointing it at production.
type Shape string

// The shapes.
const (
	ShapeNative    Shape = "native"     // key = id, {"device_id","ts",…}
	ShapeEMQX5     Shape = "emqx5"      // EMQX 5's Kafka sink: the rule's JSON, the message in payload
	ShapeEMQX4     Shape = "emqx4"      // EMQX 4: client_id, payload in base64
	ShapeMQTTTopic Shape = "mqtt-topic" // key = devices/<id>/up, a raw value (HiveMQ, Confluent MQTT, Waterstream)
	ShapeAzure     Shape = "azure"      // Azure IoT Hub: the id in an AMQP-typed header
	ShapeAvro      Shape = "avro"       // Avro in the schema-registry wire format
)

// Shapes lists every shape, for flags and errors.
var Shapes = []Shape{ShapeNative, ShapeEMQX5, ShapeEMQX4, ShapeMQTTTopic, ShapeAzure, ShapeAvro}

// Valid reports whether s names a shape ("" is native).
func (s Shape) Valid() bool {
	for _, k := range Shapes {
		if s == k || s == "" {
			return true
		}
	}
	return false
}

// AvroEncoder writes a heartbeat as an Avro value in the schema-registry
// wire format (the shape avro needs one).
type AvroEncoder func(id, class string, tsMs, timeoutMs int64) ([]byte, error)

// message writes the heartbeat of device id at now in shape s.
func (s Shape) message(id string, now time.Time, class string, timeoutMs int64, avro AvroEncoder) (kafka.Message, error) {
	ms := now.UnixMilli()
	inner := `{"ts":` + strconv.FormatInt(ms, 10)
	if class != "" {
		inner += `,"class":` + strconv.Quote(class)
	}
	if timeoutMs > 0 {
		inner += `,"timeout_ms":` + strconv.FormatInt(timeoutMs, 10)
	}
	inner += `,"temp":21.5}`
	m := kafka.Message{Time: now}
	switch s {
	case ShapeEMQX5:
		m.Value = fmt.Appendf(nil, `{"clientid":%q,"username":"fleet","topic":"devices/%s/up","timestamp":%d,"qos":1,"payload":%q}`, id, id, ms, inner)
	case ShapeEMQX4:
		m.Value = fmt.Appendf(nil, `{"client_id":%q,"topic":"devices/%s/up","ts":%d,"qos":1,"payload":%q}`, id, id, ms, base64.StdEncoding.EncodeToString([]byte(inner)))
	case ShapeMQTTTopic:
		m.Key, m.Value = []byte("devices/"+id+"/up"), []byte(inner)
	case ShapeAzure:
		m.Value = []byte(inner)
		m.Headers = []kafka.Header{
			{Key: "iothub-connection-device-id", Value: append([]byte{0xA1, byte(len(id))}, id...)},
			{Key: "iothub-enqueuedtime", Value: binary.BigEndian.AppendUint64([]byte{0x83}, uint64(ms))},
		}
	case ShapeAvro:
		if avro == nil {
			return m, fmt.Errorf("shape avro needs a schema registry")
		}
		v, err := avro(id, class, ms, timeoutMs)
		if err != nil {
			return m, err
		}
		m.Key, m.Value = []byte(id), v
	default:
		return m, fmt.Errorf("unknown shape %q", s)
	}
	return m, nil
}
