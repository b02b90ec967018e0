package decode

import (
	"encoding/binary"
	"math"
)

// Record headers, read where they lie: Message.Headers holds a record's
// header section as the Kafka record format (v2) writes it — a zigzag varint
// count, then per header its key and its value, each a zigzag varint length
// (-1: null) and the bytes. Nothing is copied or allocated to find one.

// findHeader returns the value of the last header named name (Kafka allows
// repeats; the last one stands, as for JSON members), and whether there is
// one. A malformed section counts as no header.
func findHeader(h []byte, name string) (value []byte, ok bool) {
	n, h, good := varint(h)
	if !good || n < 0 {
		return nil, false
	}
	for ; n > 0; n-- {
		var k, v []byte
		var null bool
		if k, _, h, good = varBytes(h); !good {
			return nil, false
		}
		if v, null, h, good = varBytes(h); !good {
			return nil, false
		}
		if string(k) == name {
			value, ok = v, !null
		}
	}
	return value, ok
}

// varint reads a zigzag varint.
func varint(b []byte) (int64, []byte, bool) {
	u, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return int64(u>>1) ^ -int64(u&1), b[n:], true
}

func varBytes(b []byte) (v []byte, null bool, rest []byte, ok bool) {
	n, b, ok := varint(b)
	switch {
	case !ok:
		return nil, false, nil, false
	case n < 0:
		return nil, true, b, true
	case n > int64(len(b)):
		return nil, false, nil, false
	}
	return b[:n], false, b[n:], true
}

// AppendHeader appends one header to a header section's headers (without
// the count); AppendHeaders writes the count in front. For tests and
// simulators that build Message.Headers.
func AppendHeader(dst []byte, key string, value []byte) []byte {
	dst = binary.AppendUvarint(dst, zigzag(int64(len(key))))
	dst = append(dst, key...)
	if value == nil {
		return binary.AppendUvarint(dst, zigzag(-1))
	}
	dst = binary.AppendUvarint(dst, zigzag(int64(len(value))))
	return append(dst, value...)
}

// AppendHeaders appends a header section of n headers whose bodies
// (AppendHeader's output) are body.
func AppendHeaders(dst []byte, n int, body []byte) []byte {
	dst = binary.AppendUvarint(dst, zigzag(int64(n)))
	return append(dst, body...)
}

func zigzag(n int64) uint64 { return uint64(n<<1) ^ uint64(n>>63) }

// AMQP's typed encoding, as Azure IoT Hub's Kafka endpoint writes the
// properties it adds (iothub-connection-device-id, iothub-enqueuedtime):
// a constructor byte, then the value. The constructors read here cannot
// begin UTF-8 text (0x83 is a continuation byte, 0xA1-0xB3 too), so a
// header is either one or the other, never ambiguous.
const (
	amqpNull      = 0x40
	amqpTimestamp = 0x83 // 8-byte big-endian signed ms since the epoch
	amqpStr8      = 0xA1 // 1-byte length, UTF-8
	amqpSym8      = 0xA3 // 1-byte length, ASCII
	amqpStr32     = 0xB1 // 4-byte big-endian length, UTF-8
	amqpSym32     = 0xB3 // 4-byte big-endian length, ASCII
)

// headerValue turns a header's bytes into a located value: AMQP-typed
// strings and timestamps decoded, anything else taken as text. An AMQP
// value that is cut short, or typed as something flatline does not read,
// is kindOther (a wrong type).
func headerValue(v []byte) (raw []byte, kind valueKind, ms int64) {
	if len(v) == 0 {
		return nil, kindAbsent, 0
	}
	switch v[0] {
	case amqpNull:
		if len(v) == 1 {
			return nil, kindAbsent, 0
		}
	case amqpTimestamp:
		if len(v) == 9 {
			return nil, kindTime, int64(binary.BigEndian.Uint64(v[1:]))
		}
		return nil, kindOther, 0
	case amqpStr8, amqpSym8:
		if len(v) >= 2 && int(v[1]) == len(v)-2 {
			return v[2:], kindString, 0
		}
		return nil, kindOther, 0
	case amqpStr32, amqpSym32:
		if len(v) >= 5 {
			if n := binary.BigEndian.Uint32(v[1:]); n <= math.MaxInt32 && int(n) == len(v)-5 {
				return v[5:], kindString, 0
			}
		}
		return nil, kindOther, 0
	}
	if v[0] >= 0x80 && v[0] < 0xC2 || v[0] > 0xF4 {
		return nil, kindOther, 0 // another AMQP type: no UTF-8 text starts so
	}
	return v, kindString, 0
}

// AMQPString encodes s as an AMQP str8 (or str32 when longer than 255
// bytes), as Azure IoT Hub writes string properties into Kafka headers.
func AMQPString(s string) []byte {
	if len(s) <= math.MaxUint8 {
		return append([]byte{amqpStr8, byte(len(s))}, s...)
	}
	b := binary.BigEndian.AppendUint32([]byte{amqpStr32}, uint32(len(s)))
	return append(b, s...)
}

// AMQPTimestamp encodes ms as an AMQP timestamp.
func AMQPTimestamp(ms int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{amqpTimestamp}, uint64(ms))
}
