package kfetch

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config shapes every fetch of a Fetcher.
type Config struct {
	// MaxWait is how long the broker may hold a fetch that finds fewer than
	// MinBytes. Default: 250ms.
	MaxWait time.Duration
	// MinBytes is how much the broker waits for before answering early.
	// Default: 1.
	MinBytes int
	// MaxBytes bounds the whole response. The broker returns at least one
	// batch even when it is larger, so a big batch never stalls a
	// partition.
	//
	// Through Fetcher it also bounds the heap a fetch holds, which is far
	// more than MaxBytes: kafka-go decodes the whole answer before
	// returning it and gives every batch its own 64 KiB pages (pooled),
	// held until the batch's records are read. An answer of n batches
	// holds about n × 64 KiB. Producers that send a batch per heartbeat
	// are the worst case: a one-record batch is ~100-200 bytes, so 64 KiB
	// of them hold ~25-40 MiB. Batching producers lose nothing to a small
	// MaxBytes, as a batch of any size still comes whole. A Conn holds
	// only the answer and its decompressed batches and can take 1 MiB or
	// more. Default: 64 KiB.
	MaxBytes int
	// PartitionMaxBytes bounds the partition's share of the response; 0
	// means MaxBytes. Default: 0.
	PartitionMaxBytes int
	// Grace is how long past MaxWait the answer may take to arrive and
	// decode before the fetch fails and its connection is dropped, when the
	// caller's context has no earlier deadline. Default: 2s.
	Grace time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxWait:  250 * time.Millisecond,
		MinBytes: 1,
		MaxBytes: 64 << 10,
		Grace:    2 * time.Second,
	}
}

// Validate checks the fields; errors name the offending one.
func (c Config) Validate() error {
	var errs []error
	if c.MaxWait < time.Millisecond || c.MaxWait.Milliseconds() > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("kfetch: MaxWait %v: want at least 1ms (the protocol counts milliseconds)", c.MaxWait))
	}
	if c.MinBytes < 0 || c.MinBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("kfetch: MinBytes %d out of range", c.MinBytes))
	}
	if c.MaxBytes <= 0 || c.MaxBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("kfetch: MaxBytes %d out of range", c.MaxBytes))
	}
	if c.PartitionMaxBytes < 0 || c.PartitionMaxBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("kfetch: PartitionMaxBytes %d out of range", c.PartitionMaxBytes))
	}
	if c.Grace <= 0 {
		errs = append(errs, fmt.Errorf("kfetch: Grace %v: want a positive duration", c.Grace))
	}
	return errors.Join(errs...)
}

func (c Config) partitionMaxBytes() int32 {
	if c.PartitionMaxBytes == 0 {
		return int32(c.MaxBytes)
	}
	return int32(c.PartitionMaxBytes)
}
