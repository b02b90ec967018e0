package dispatch

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
)

func testKafkaConfig(brokers []string) kafkaconn.Config {
	k := kafkaconn.DefaultConfig()
	k.Brokers = brokers
	return k
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
