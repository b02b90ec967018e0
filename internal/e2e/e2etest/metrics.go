package e2etest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a /metrics page read by Prometheus' own text parser: the
// metric families by name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses a Prometheus text exposition.
func ParseMetrics(page []byte) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return families, nil
}

// ScrapeMetrics GETs url, a /metrics page, and parses it.
func ScrapeMetrics(url string) (Metrics, error) {
	return ScrapeMetricsWith(context.Background(), getClient, url)
}

// ScrapeMetricsWith is ScrapeMetrics through client, within ctx.
func ScrapeMetricsWith(ctx context.Context, client *http.Client, url string) (Metrics, error) {
	page, err := httpGet(ctx, client, url)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(page)
}

// Value is the value of family name's sample whose labels are exactly
// labels (name, value, name, value, …), and whether there is one. A
// histogram's value is its count of observations.
func (m Metrics) Value(name string, labels ...string) (float64, bool) {
	for _, s := range m[name].GetMetric() {
		if hasExactly(s.GetLabel(), labels) {
			return value(s), true
		}
	}
	return 0, false
}

// Sum is the sum of the values of family name's samples.
func (m Metrics) Sum(name string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		sum += value(s)
	}
	return sum
}

// Samples is how many label sets family name has.
func (m Metrics) Samples(name string) int { return len(m[name].GetMetric()) }

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	case s.Summary != nil:
		return float64(s.Summary.GetSampleCount())
	default:
		return s.GetUntyped().GetValue()
	}
}

func hasExactly(have []*dto.LabelPair, want []string) bool {
	if 2*len(have) != len(want) {
		return false
	}
	for i := 0; i < len(want); i += 2 {
		found := false
		for _, l := range have {
			if l.GetName() == want[i] {
				found = l.GetValue() == want[i+1]
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
