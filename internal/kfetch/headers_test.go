package kfetch

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// parseHeaders reads a record format (v2) header section: a zigzag varint
// count, then each key and value as zigzag-varint-length bytes (-1 null).
func parseHeaders(t *testing.T, b []byte) []string {
	t.Helper()
	if len(b) == 0 {
		return nil // Fetcher's record without headers
	}
	next := func() int64 {
		u, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatalf("header section cut short: %x", b)
		}
		b = b[n:]
		return int64(u>>1) ^ -int64(u&1)
	}
	bytesOf := func() string {
		n := next()
		if n < 0 {
			return "<null>"
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	var out []string
	for n := next(); n > 0; n-- {
		k := bytesOf()
		out = append(out, k+"="+bytesOf())
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes after the headers", len(b))
	}
	return out
}

// TestRecordsKeepTheirHeaders: both paths hand on each record's header
// section as the producer wrote it, null values and repeats included, and
// an empty one for a record without headers.
func TestRecordsKeepTheirHeaders(t *testing.T) {
	t.Parallel()
	const topic = "with-headers"
	r := newRig(t, topic)
	produce(t, r.producer(t, topic),
		&kgo.Record{Value: []byte("a"), Headers: []kgo.RecordHeader{
			{Key: "iothub-connection-device-id", Value: []byte{0xA1, 4, 'd', '-', '4', '2'}},
			{Key: "empty", Value: []byte{}}, {Key: "null"}, {Key: "k", Value: []byte("1")}, {Key: "k", Value: []byte("2")},
		}},
		&kgo.Record{Value: []byte("b")})
	want := [][]string{
		{"iothub-connection-device-id=\xa1\x04d-42", "empty=", "null=<null>", "k=1", "k=2"},
		nil,
	}
	for name, f := range r.paths(t, DefaultConfig()) {
		res := new(Result)
		if err := f.Fetch(context.Background(), topic, 0, 0, res); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(res.Records) != 2 {
			t.Fatalf("%s: %d records", name, len(res.Records))
		}
		for i, rec := range res.Records {
			got := parseHeaders(t, rec.Headers)
			if fmt.Sprint(got) != fmt.Sprint(want[i]) {
				t.Errorf("%s: record %d headers %q, want %q", name, i, got, want[i])
			}
		}
	}
}
