package dispatch

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

// javaMurmur2 is org.apache.kafka.common.utils.Utils.murmur2, transcribed
// with Java's int arithmetic (signed 32-bit, >>> as an unsigned shift), as
// an independent reference for kafka-go's Murmur2Balancer.
func javaMurmur2(data []byte) int32 {
	const seed, m, r = int32(-1756908916) /* 0x9747b28c */, int32(0x5bd1e995), 24
	length := int32(len(data))
	h := seed ^ length
	length4 := length / 4
	for i := int32(0); i < length4; i++ {
		i4 := i * 4
		k := int32(data[i4]) + int32(data[i4+1])<<8 + int32(data[i4+2])<<16 + int32(data[i4+3])<<24
		k *= m
		k ^= int32(uint32(k) >> r)
		k *= m
		h *= m
		h ^= k
	}
	switch length % 4 { // Java falls through from case 3 to case 1.
	case 3:
		h ^= int32(data[(length & ^3)+2]) << 16
		fallthrough
	case 2:
		h ^= int32(data[(length & ^3)+1]) << 8
		fallthrough
	case 1:
		h ^= int32(data[length & ^3])
		h *= m
	}
	h ^= int32(uint32(h) >> 13)
	h *= m
	h ^= int32(uint32(h) >> 15)
	return h
}

// javaPartition is the Java producer's default partition of a keyed record:
// Utils.toPositive(Utils.murmur2(key)) % numPartitions.
func javaPartition(key []byte, numPartitions int) int {
	return int(javaMurmur2(key)&0x7fffffff) % numPartitions
}

// Published Java values: Kafka's UtilsTest.testMurmur2 and the vectors Akka
// took from Kafka's Utils.murmur2. The partitions follow from them by hand
// (toPositive(h) % n).
var javaVectors = []struct {
	key         string
	hash        int32
	p4, p16, p7 int
}{
	{"21", -973932308, 0, 12, 3},
	{"foobar", -790332482, 2, 14, 0},
	{"a-little-bit-long-string", -985981536, 0, 0, 1},
	{"a-little-bit-longer-string", -1486304829, 3, 3, 0},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, 1, 13, 3},
	{"abc", 479470107, 3, 11, 4},
	{"1", -1993445489, 3, 15, 2},
	{"12", 126087238, 2, 6, 4},
	{"123", -267702483, 1, 13, 3},
	{"1234", -1614185708, 0, 4, 0},
	{"12345", -1188365604, 0, 12, 3},
}

func TestMurmur2MatchesJava(t *testing.T) {
	t.Parallel()
	bal := &kafka.Murmur2Balancer{}
	parts := func(n int) []int {
		ps := make([]int, n)
		for i := range ps {
			ps[i] = i
		}
		return ps
	}
	for _, v := range javaVectors {
		if got := javaMurmur2([]byte(v.key)); got != v.hash {
			t.Errorf("javaMurmur2(%q) = %d, Java says %d", v.key, got, v.hash)
		}
		for n, want := range map[int]int{4: v.p4, 16: v.p16, 7: v.p7} {
			if got := javaPartition([]byte(v.key), n); got != want {
				t.Errorf("javaPartition(%q, %d) = %d, want %d", v.key, n, got, want)
			}
			if got := bal.Balance(kafka.Message{Key: []byte(v.key)}, parts(n)...); got != want {
				t.Errorf("kafka-go Murmur2Balancer(%q) over %d partitions = %d, Java says %d", v.key, n, got, want)
			}
		}
	}
	// And on the ids the other tests use, over many partition counts.
	for _, id := range awkwardIDs {
		for n := 1; n <= 64; n++ {
			if got, want := bal.Balance(kafka.Message{Key: []byte(id)}, parts(n)...), javaPartition([]byte(id), n); got != want {
				t.Errorf("Murmur2Balancer(%q) over %d partitions = %d, Java %d", id, n, got, want)
			}
		}
	}
}
