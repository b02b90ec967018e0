package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/decode/avro"
	"github.com/flatline-dev/flatline/ingest"
	"github.com/flatline-dev/flatline/internal/simulate"
)

// shapeIngest configures ingest to read shape as the README's "Real
// sources" blocks do (internal/e2e/pipeline's TestShapes runs those blocks
// themselves): `flatline dev --shape` shows a shape working before a user
// points flatline at a topic of that shape.
func shapeIngest(shape simulate.Shape, c *ingest.Config) {
	payloadFrom := decode.From{TS: "payload:ts", Class: "payload:class", TimeoutMS: "payload:timeout_ms", Parent: "payload:parent"}
	switch shape {
	case simulate.ShapeEMQX5:
		c.From, c.Payload = payloadFrom, "value:payload"
		c.From.DeviceID = "value:clientid"
	case simulate.ShapeEMQX4:
		c.From, c.Payload, c.PayloadEncoding = payloadFrom, "value:payload", decode.PayloadBase64JSON
		c.From.DeviceID = "value:client_id"
	case simulate.ShapeMQTTTopic:
		c.Format = decode.FormatKey
		c.From = decode.From{DeviceID: "key:^devices/([^/]+)/", TS: "kafka"}
	case simulate.ShapeAzure:
		c.Format = decode.FormatKey
		c.From = decode.From{DeviceID: "header:iothub-connection-device-id", TS: "header:iothub-enqueuedtime"}
	case simulate.ShapeAvro:
		c.Format = decode.FormatAvro
	}
}

// AvroEncoder registers the demo's heartbeat schema with the registry cfg
// names, under the signals topic's value subject, and returns the encoder
// the simulated fleet writes Avro heartbeats with, and the registry client
// to close when the fleet stops.
func AvroEncoder(ctx context.Context, cfg avro.Config, signalsTopic string) (simulate.AvroEncoder, func(), error) {
	reg, err := avro.NewRegistry(cfg)
	if err != nil {
		return nil, nil, err
	}
	enc, err := reg.HeartbeatEncoder(ctx, signalsTopic+"-value")
	if err != nil {
		reg.Close()
		return nil, nil, fmt.Errorf("shape avro: %w", err)
	}
	return func(id, class string, tsMs, timeoutMs int64) ([]byte, error) {
		h := avro.Heartbeat{DeviceID: id, TS: time.UnixMilli(tsMs), Meta: avro.HeartbeatMeta{Site: "demo"}}
		if class != "" {
			h.Class = &class
		}
		if timeoutMs > 0 {
			h.TimeoutMs = &timeoutMs
		}
		return enc(h)
	}, reg.Close, nil
}
