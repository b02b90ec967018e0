package demo

import (
	"github.com/flatline-dev/flatline/decode"
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
