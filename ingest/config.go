package ingest

import (
	"fmt"
	"time"

	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/decode/avro"
)

// Config is the ingest section of the configuration.
type Config struct {
	// Format of heartbeat values: json, key or avro. Default: json.
	Format decode.Format `config:"format"`
	// From says where each field of a heartbeat comes from (the README's
	// "Real sources"). Default: the native shape.
	From decode.From `config:"from"`
	// Payload is "" or value:<path>: the string member of the value that
	// holds the device's own message, read by payload:<path> expressions.
	Payload string `config:"payload"`
	// PayloadEncoding is how that payload is written: json or base64-json.
	// Default: json.
	PayloadEncoding decode.PayloadEncoding `config:"payload_encoding"`
	// SchemaRegistry is where format avro finds its schemas.
	SchemaRegistry avro.Config `config:"schema_registry"`
	// BatchSize is the most messages written to Redis in one round trip.
	// Default: 4096.
	BatchSize int `config:"batch_size"`
	// BatchWait is how long a batch waits to fill before it is written.
	// Default: 0 — a batch takes what has arrived; while one batch is in
	// Redis the next fills by itself, so batches grow with the load.
	BatchWait time.Duration `config:"batch_wait"`
	// MaxSkew is how far a heartbeat's ts may be from its Kafka timestamp
	// before the Kafka timestamp is used instead. Must be below timeouts.min.
	// Default: 500ms.
	MaxSkew time.Duration `config:"max_skew"`
	// CoalesceWindow lets a heartbeat skip its Redis write when this
	// instance wrote the device less than the window ago; written deadlines
	// are padded by the window, so timeouts fire at most that late, never
	// early. Default: 0 (exact).
	CoalesceWindow time.Duration `config:"coalesce_window"`
	// MaxValueBytes is the largest heartbeat value accepted (reason
	// too_large above it). Default: 65536.
	MaxValueBytes int `config:"max_value_bytes"`
	// ProbeInterval is how often ingest asks Kafka for the high-water marks
	// of its partitions: once everything below a probe's mark is written,
	// the partition's watermark moves to the probe's send time. Default: 10ms.
	ProbeInterval time.Duration `config:"probe_interval"`
	// ReleaseAfter is how long this instance's Redis writes may go without
	// an answer (failing on the way to Redis, or timing out) before its
	// ingest leaves the consumer group, so that instances that can write
	// take its partitions over; it joins again once Redis answers. 0 never
	// leaves. Default: 5s.
	ReleaseAfter time.Duration `config:"release_after"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Format:          decode.FormatJSON,
		From:            decode.DefaultFrom(),
		PayloadEncoding: decode.PayloadJSON,
		SchemaRegistry:  avro.DefaultConfig(),
		BatchSize:       4096,
		BatchWait:       0,
		MaxSkew:         500 * time.Millisecond,
		MaxValueBytes:   64 << 10,
		ProbeInterval:   10 * time.Millisecond,
		ReleaseAfter:    5 * time.Second,
	}
}

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	dc := c.decoderConfig()
	if c.Format == decode.FormatAvro {
		if err := c.SchemaRegistry.Validate("ingest.schema_registry"); err != nil {
			return err
		}
		dc.Avro = &decode.Avro{} // stands for the registry New connects to
	}
	if err := dc.Validate(); err != nil {
		return err
	}
	if c.BatchSize < 1 || c.BatchSize > 100000 {
		return fmt.Errorf("ingest.batch_size: must be within [1, 100000], got %d", c.BatchSize)
	}
	if c.BatchWait < 0 || c.BatchWait > 10*time.Second {
		return fmt.Errorf("ingest.batch_wait: must be within [0, 10s], got %s", c.BatchWait)
	}
	if c.MaxSkew < 0 {
		return fmt.Errorf("ingest.max_skew: must not be negative, got %s", c.MaxSkew)
	}
	if c.CoalesceWindow < 0 {
		return fmt.Errorf("ingest.coalesce_window: must not be negative, got %s", c.CoalesceWindow)
	}
	if c.MaxValueBytes < 64 || c.MaxValueBytes > 16<<20 {
		return fmt.Errorf("ingest.max_value_bytes: must be within [64, 16777216], got %d", c.MaxValueBytes)
	}
	if c.ProbeInterval < time.Millisecond || c.ProbeInterval > 10*time.Second {
		return fmt.Errorf("ingest.probe_interval: must be within [1ms, 10s], got %s", c.ProbeInterval)
	}
	if c.ReleaseAfter != 0 && (c.ReleaseAfter < time.Second || c.ReleaseAfter > 10*time.Minute) {
		return fmt.Errorf("ingest.release_after: must be 0 (never leave the consumer group) or within [1s, 10m], got %s", c.ReleaseAfter)
	}
	return nil
}

// decoderConfig returns the decoding part of the section. Timeouts and the
// Avro reader come from elsewhere; Validate checks only the expressions.
func (c Config) decoderConfig() decode.Config {
	return decode.Config{Format: c.Format, From: c.From, Payload: c.Payload, PayloadEncoding: c.PayloadEncoding,
		MaxSkew: c.MaxSkew, MaxValueBytes: c.MaxValueBytes}
}
