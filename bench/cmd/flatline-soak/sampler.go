package main

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/internal/testenv/host"
)

// slots holds the instance running in each slot now, for the sampler and
// the plan; every instance ever started is kept for the report.
type slots struct {
	mu  sync.Mutex
	cur map[string]*instance
	all []*instance
}

func newSlots() *slots { return &slots{cur: map[string]*instance{}} }

func (s *slots) set(in *instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur[in.slot] = in
	s.all = append(s.all, in)
}

func (s *slots) remove(slot string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cur, slot)
}

func (s *slots) get(slot string) *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur[slot]
}

func (s *slots) current() []*instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*instance, 0, len(s.cur))
	for _, in := range s.cur {
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b *instance) int { return cmp.Compare(a.slot, b.slot) })
	return out
}

// procSample is one instance's resources at one moment.
type procSample struct {
	T          float64 `json:"t_s"` // seconds since the soak's start
	Slot       string  `json:"slot"`
	ID         string  `json:"instance_id"`
	PID        int     `json:"pid"`
	Goroutines float64 `json:"goroutines"`
	HeapAlloc  float64 `json:"heap_alloc_bytes"`
	HeapGoal   float64 `json:"heap_goal_bytes"`
	FDs        int     `json:"fds"`
	RSS        int64   `json:"rss_bytes"`
	KafkaConns int     `json:"kafka_conns"`
	RedisConns int     `json:"redis_conns"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Err        string  `json:"error,omitempty"`
}

// redisSample is Redis' own count of its clients at one moment.
type redisSample struct {
	T                float64 `json:"t_s"`
	ConnectedClients int     `json:"connected_clients"`
	Err              string  `json:"error,omitempty"`
}

// sampler reads every running instance's resources, and Redis'
// connected_clients, every period.
type sampler struct {
	in     *infra
	slots  *slots
	t0     time.Time
	period time.Duration

	mu    sync.Mutex
	procs []procSample
	redis []redisSample
}

// Run samples at once and then every period until ctx ends.
func (s *sampler) Run(ctx context.Context) error {
	// One connection per scrape, as Prometheus' would be after an idle
	// spell; the transport is this goroutine's and closed with it.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	t := time.NewTicker(s.period)
	defer t.Stop()
	for {
		s.sampleAll(ctx, client)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *sampler) sampleAll(ctx context.Context, client *http.Client) {
	var ps []procSample
	for _, in := range s.slots.current() {
		if in.exited() {
			continue
		}
		ps = append(ps, s.sampleOne(ctx, client, in))
	}
	rs := redisSample{T: time.Since(s.t0).Seconds()}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	n, err := s.in.connectedClients(rctx)
	cancel()
	if err != nil {
		rs.Err = err.Error()
	}
	rs.ConnectedClients = n
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	s.procs = append(s.procs, ps...)
	s.redis = append(s.redis, rs)
	s.mu.Unlock()
}

func (s *sampler) sampleOne(ctx context.Context, client *http.Client, in *instance) procSample {
	p := procSample{T: time.Since(s.t0).Seconds(), Slot: in.slot, ID: in.id, PID: in.pid}
	m, err := e2etest.ScrapeMetricsWith(ctx, client, "http://"+in.httpAddr+"/metrics")
	if err != nil {
		p.Err = err.Error()
		return p
	}
	p.Goroutines, _ = m.Value("go_goroutines")
	p.HeapAlloc, _ = m.Value("go_memstats_heap_alloc_bytes")
	p.HeapGoal, _ = m.Value("go_memstats_next_gc_bytes")
	res, err := testenv.ReadProcResources(in.pid)
	if err != nil {
		p.Err = err.Error()
		return p
	}
	p.FDs, p.KafkaConns, p.RedisConns = res.FDs, res.TCPTo[s.in.kafkaPort], res.TCPTo[s.in.redisPort]
	hp := host.ReadProc(in.pid)
	p.RSS, p.CPUSeconds = hp.RSS, hp.CPU.Seconds()
	return p
}

// samples returns what was sampled; call it once Run has returned.
func (s *sampler) samples() ([]procSample, []redisSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.procs), slices.Clone(s.redis)
}
