// Package kafkaconn builds kafka-go dialers and transports from the kafka
// section of the configuration (brokers, TLS, SASL).
package kafkaconn

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/flatline-dev/flatline/internal/confcheck"
	"github.com/flatline-dev/flatline/internal/secret"
	"github.com/flatline-dev/flatline/internal/tlsconf"
)

// Config is the kafka section of the configuration.
type Config struct {
	// Brokers are bootstrap host:port addresses. Default: [127.0.0.1:9092].
	Brokers []string `config:"brokers"`
	// SignalsTopic carries heartbeats. Default: device-signals.
	SignalsTopic string `config:"signals_topic"`
	// TimeoutsTopic receives timeout and recovered events. Default: device-timeouts.
	TimeoutsTopic string `config:"timeouts_topic"`
	// DeadLetterTopic receives invalid heartbeats; empty disables.
	// Default: device-signals-dlq.
	DeadLetterTopic string `config:"dead_letter_topic"`
	// GroupID is the consumer group of ingest. Default: flatline.
	GroupID string `config:"group_id"`
	// SessionTimeout is the consumer-group session timeout: how soon a dead
	// instance's partitions move on. Default: 6s.
	SessionTimeout time.Duration `config:"session_timeout"`
	// Compression compresses the produced events and dead letters: none,
	// gzip, snappy, lz4 or zstd. Default: none.
	Compression string `config:"compression"`
	// StartOffset is where ingest starts reading a partition that has no
	// committed offset, and where it moves when the committed offset is out
	// of range (deleted by retention; the topic recreated; the log
	// truncated): StartEarliest or StartLatest. Default: earliest.
	StartOffset string `config:"start_offset"`
	// TLS configures TLS to the brokers.
	TLS tlsconf.Config `config:"tls"`
	// SASL configures authentication.
	SASL SASLConfig `config:"sasl"`
}

// SASLConfig configures SASL authentication.
type SASLConfig struct {
	// Mechanism is "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `config:"mechanism"`
	Username  string `config:"username"`
	Password  string `config:"password"`
	// PasswordFile names a file holding Password instead (a mounted
	// Kubernetes Secret), read when a dialer or transport is built; set
	// one of the two. Default: "" (none).
	PasswordFile string `config:"password_file"`
}

// The values of kafka.start_offset.
const (
	// StartEarliest reads from the partition's first offset: nothing
	// still in the topic is missed.
	StartEarliest = "earliest"
	// StartLatest reads from the partition's last stable offset: only
	// what is appended from then on.
	StartLatest = "latest"
)

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Brokers:         []string{"127.0.0.1:9092"},
		SignalsTopic:    "device-signals",
		TimeoutsTopic:   "device-timeouts",
		DeadLetterTopic: "device-signals-dlq",
		GroupID:         "flatline",
		SessionTimeout:  6 * time.Second,
		Compression:     "none",
		StartOffset:     StartEarliest,
	}
}

// codecs are the kafka.compression values and their kafka-go codecs.
var codecs = map[string]kafka.Compression{
	"none": 0, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd,
}

// Codec is the kafka-go compression of kafka.compression (0: none).
func (c Config) Codec() kafka.Compression { return codecs[c.Compression] }

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("kafka.brokers: at least one broker is required")
	}
	for _, b := range c.Brokers {
		if !strings.Contains(b, ":") {
			return fmt.Errorf("kafka.brokers: %q is not host:port", b)
		}
	}
	if c.SignalsTopic == "" {
		return fmt.Errorf("kafka.signals_topic: must not be empty")
	}
	if c.TimeoutsTopic == "" {
		return fmt.Errorf("kafka.timeouts_topic: must not be empty")
	}
	if c.TimeoutsTopic == c.SignalsTopic {
		return fmt.Errorf("kafka.timeouts_topic: must differ from kafka.signals_topic")
	}
	if c.DeadLetterTopic != "" && (c.DeadLetterTopic == c.SignalsTopic || c.DeadLetterTopic == c.TimeoutsTopic) {
		return fmt.Errorf("kafka.dead_letter_topic: must differ from kafka.signals_topic and kafka.timeouts_topic")
	}
	if c.GroupID == "" {
		return fmt.Errorf("kafka.group_id: must not be empty")
	}
	if err := confcheck.Within("kafka.session_timeout", c.SessionTimeout, time.Second, 5*time.Minute); err != nil {
		return err
	}
	if _, ok := codecs[c.Compression]; !ok {
		return fmt.Errorf("kafka.compression: want none, gzip, snappy, lz4 or zstd, got %q", c.Compression)
	}
	if c.StartOffset != StartEarliest && c.StartOffset != StartLatest {
		return fmt.Errorf("kafka.start_offset: want earliest or latest, got %q", c.StartOffset)
	}
	switch strings.ToUpper(c.SASL.Mechanism) {
	case "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return fmt.Errorf("kafka.sasl.mechanism: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got %q", c.SASL.Mechanism)
	}
	if c.SASL.Mechanism != "" && c.SASL.Username == "" {
		return fmt.Errorf("kafka.sasl.username: required with kafka.sasl.mechanism")
	}
	// Read here too, so that a missing or unreadable file fails `config
	// validate` and the start, naming the key, rather than the first dial.
	if _, err := c.password(); err != nil {
		return err
	}
	return c.TLS.Validate("kafka.tls")
}

// password is kafka.sasl.password, read from its file if set there.
func (c Config) password() (string, error) {
	return secret.Password("kafka.sasl.password", c.SASL.Password, c.SASL.PasswordFile)
}

func (c Config) mechanism() (sasl.Mechanism, error) {
	mech := strings.ToUpper(c.SASL.Mechanism)
	if mech == "" {
		return nil, nil
	}
	pw, err := c.password()
	if err != nil {
		return nil, err
	}
	switch mech {
	case "PLAIN":
		return plain.Mechanism{Username: c.SASL.Username, Password: pw}, nil
	case "SCRAM-SHA-256":
		return scram.Mechanism(scram.SHA256, c.SASL.Username, pw)
	case "SCRAM-SHA-512":
		return scram.Mechanism(scram.SHA512, c.SASL.Username, pw)
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: unsupported %q", c.SASL.Mechanism)
}

// security builds what a dialer and a transport both authenticate with.
func (c Config) security() (sasl.Mechanism, *tls.Config, error) {
	mech, err := c.mechanism()
	if err != nil {
		return nil, nil, err
	}
	tc, err := c.TLS.Build()
	if err != nil {
		return nil, nil, fmt.Errorf("kafka.tls: %w", err)
	}
	return mech, tc, nil
}

// Dialer builds the dialer for consumer groups and readers.
func (c Config) Dialer() (*kafka.Dialer, error) {
	mech, tc, err := c.security()
	if err != nil {
		return nil, err
	}
	return &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, SASLMechanism: mech, TLS: tc}, nil
}

// Client builds a kafka-go client over a Transport of its own. A Transport
// keeps a connection pool and a metadata goroutine per broker address for
// as long as it lives: the owner of the client closes it (CloseClient) once
// nothing sends through it, and never builds one per request.
func (c Config) Client(timeout time.Duration) (*kafka.Client, error) {
	tr, err := c.Transport()
	if err != nil {
		return nil, err
	}
	return &kafka.Client{Addr: kafka.TCP(c.Brokers...), Transport: tr, Timeout: timeout}, nil
}

// CloseClient closes the connections of a client's Transport and stops its
// metadata goroutine; nil is a no-op. Connections in use are closed once
// their request ends.
func CloseClient(c *kafka.Client) {
	if c == nil {
		return
	}
	if tr, ok := c.Transport.(*kafka.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// Transport builds the transport for writers and clients.
func (c Config) Transport() (*kafka.Transport, error) {
	mech, tc, err := c.security()
	if err != nil {
		return nil, err
	}
	return &kafka.Transport{SASL: mech, TLS: tc, DialTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}, nil
}
