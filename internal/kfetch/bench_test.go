package kfetch

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerEnv makes the test binary a kfake broker instead of running tests:
// the benchmarks keep the broker in another process so that allocs/op
// count the client's allocations only.
const brokerEnv = "KFETCH_BENCH_BROKER"

func TestMain(m *testing.M) {
	if topic := os.Getenv(brokerEnv); topic != "" {
		serveBroker(topic)
		return
	}
	// A goroutine a test started that outlives it fails the package.
	testenv.VerifyTestMain(m)
}

// serveBroker runs kfake until stdin closes, its address on stdout. The
// topic has two partitions; the benchmarks fill partition 0.
func serveBroker(topic string) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println(strings.Join(c.ListenAddrs(), ","))
	_, _ = bufio.NewReader(os.Stdin).ReadString(0) // until the parent closes stdin
}

// benchBroker starts the broker process and fills partition 0 of topic with
// n heartbeat-like records, perBatch to a produce call (a batch),
// compressed with codec.
func benchBroker(b *testing.B, topic string, n, perBatch int, codec kgo.CompressionCodec) (addr string) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), brokerEnv+"="+topic)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("broker process: %v", err)
	}
	addr = strings.TrimSpace(line)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(codec))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	now := time.Now()
	for i := 0; i < n; i += perBatch {
		var rs []*kgo.Record
		for j := i; j < min(i+perBatch, n); j++ {
			id := fmt.Sprintf("device-%06d", j)
			rs = append(rs, &kgo.Record{Key: []byte(id), Timestamp: now,
				Value: fmt.Appendf(nil, `{"device_id":%q,"ts":%d}`, id, now.UnixMilli())})
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	return addr
}

// allocsPerRecord reports allocations and bytes per record read over the
// benchmark's loop.
func allocsPerRecord(b *testing.B, read func() int) {
	b.Helper()
	read() // warm pools and buffers
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	records := 0
	for b.Loop() {
		records += read()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(records), "allocs/record")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(records), "B/record")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
}

// readToEnd returns a read for allocsPerRecord: partition 0 of topic from
// offset 0 to end through f, one Result reused; it returns the records read.
func readToEnd(b *testing.B, f fetcher, topic string, end int64) func() int {
	res := new(Result)
	return func() int {
		n := 0
		for off := int64(0); off < end; off = res.NextOffset {
			if err := f.Fetch(context.Background(), topic, 0, off, res); err != nil {
				b.Fatal(err)
			}
			n += len(res.Records)
		}
		return n
	}
}

// Reading a partition to its end with a Fetcher and a Conn (one Result
// reused) and with kafka-go's Conn.ReadBatchWith + Batch.ReadMessage, as
// ingest did, on the same records and with the same MaxBytes. Keys are 13
// bytes, values ~50.
func BenchmarkReadPartition(b *testing.B) {
	cfg := DefaultConfig()
	for _, tc := range []struct {
		records, perBatch int
		codec             kgo.CompressionCodec
	}{
		{20_000, 1000, kgo.NoCompression()},
		{20_000, 10, kgo.NoCompression()},
		{4_000, 1, kgo.NoCompression()},
		{20_000, 100, kgo.ZstdCompression()},
	} {
		topic := "bench"
		addr := benchBroker(b, topic, tc.records, tc.perBatch, tc.codec)
		end := int64(tc.records)
		b.Run(fmt.Sprintf("Fetcher/batch=%d%s", tc.perBatch, codecName(tc.codec)), func(b *testing.B) {
			tr := &kafka.Transport{}
			defer tr.CloseIdleConnections()
			f, err := New(&kafka.Client{Addr: kafka.TCP(addr), Transport: tr}, cfg)
			if err != nil {
				b.Fatal(err)
			}
			heap := answerHeap(b, tr, addr, f.request(topic, 0, 0))
			allocsPerRecord(b, readToEnd(b, f, topic, end))
			b.ReportMetric(heap, "answer-heap-B") // after allocsPerRecord: ResetTimer drops metrics
		})
		b.Run(fmt.Sprintf("Conn/batch=%d%s", tc.perBatch, codecName(tc.codec)), func(b *testing.B) {
			c, err := Dial(context.Background(), &kafka.Dialer{}, addr, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			allocsPerRecord(b, readToEnd(b, c, topic, end))
		})
		b.Run(fmt.Sprintf("FetchMany/batch=%d%s", tc.perBatch, codecName(tc.codec)), func(b *testing.B) {
			c, err := Dial(context.Background(), &kafka.Dialer{}, addr, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			// Partition 1 is empty: the request carries both, the
			// answer a section each.
			parts := []Part{{Partition: 0, Res: new(Result)}, {Partition: 1, Res: new(Result)}}
			allocsPerRecord(b, func() int {
				n := 0
				for parts[0].Offset = 0; parts[0].Offset < end; parts[0].Offset = parts[0].Res.NextOffset {
					if err := c.FetchMany(context.Background(), topic, parts); err != nil {
						b.Fatal(err)
					}
					if parts[0].Err != nil || parts[1].Err != nil {
						b.Fatal(parts[0].Err, parts[1].Err)
					}
					n += len(parts[0].Res.Records)
				}
				return n
			})
		})
		b.Run(fmt.Sprintf("ReadBatchWith/batch=%d%s", tc.perBatch, codecName(tc.codec)), func(b *testing.B) {
			conn, err := kafka.DialLeader(context.Background(), "tcp", addr, topic, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			allocsPerRecord(b, func() int {
				n := 0
				for off := int64(0); off < end; {
					if _, err := conn.Seek(off, kafka.SeekAbsolute); err != nil {
						b.Fatal(err)
					}
					batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: cfg.MaxBytes, MaxWait: cfg.MaxWait})
					for {
						if _, err := batch.ReadMessage(); err != nil {
							break
						}
						n++
					}
					off = batch.Offset()
					if err := batch.Close(); err != nil {
						b.Fatal(err)
					}
				}
				return n
			})
		})
	}
}

// answerHeap is the heap one decoded fetch answer holds before its records
// are read: kafka-go's page buffers, taken fresh (the pool emptied by GC).
func answerHeap(b *testing.B, tr *kafka.Transport, addr string, req kafka.Request) float64 {
	b.Helper()
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := tr.RoundTrip(context.Background(), kafka.TCP(addr), req)
	if err != nil {
		b.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(m)
	return float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
}

func codecName(c kgo.CompressionCodec) string {
	if c == kgo.ZstdCompression() {
		return "/zstd"
	}
	return ""
}
