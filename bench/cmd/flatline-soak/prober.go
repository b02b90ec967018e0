package main

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// probe is one kind of request a platform sends every pod, at its
// cadence: kubelet's liveness and readiness probes, Prometheus' scrape and
// a dashboard polling /status. Each is a new connection, as kubelet makes.
type probe struct {
	path    string
	every   time.Duration
	timeout time.Duration
}

var platformProbes = []probe{
	{"/healthz", 5 * time.Second, 2 * time.Second},
	{"/readyz", 5 * time.Second, 2 * time.Second},
	{"/metrics", 15 * time.Second, 10 * time.Second},
	{"/status", 2 * time.Second, 5 * time.Second},
}

// probeCount is what one slot's probes of one path got.
type probeCount struct {
	OK     int `json:"ok"`
	Failed int `json:"failed"`
	// FailedAt are the failures' times, to tell those of a restart (the
	// process was down) from the others.
	FailedAt []time.Time `json:"-"`
	// FailedOutside are the failures outside every window in which the
	// slot's process was stopping or starting.
	FailedOutside int `json:"failed_outside_restarts"`
}

// prober probes one slot's HTTP address until its context ends.
type prober struct {
	addr string
	mu   sync.Mutex
	by   map[string]*probeCount
}

func newProber(addr string) *prober {
	p := &prober{addr: addr, by: map[string]*probeCount{}}
	for _, pr := range platformProbes {
		p.by[pr.path] = &probeCount{}
	}
	return p
}

// Run sends every probe at its cadence, each from a goroutine of its own:
// a slow /status does not delay a liveness probe, as on a platform.
func (p *prober) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, pr := range platformProbes {
		g.Go(func() error {
			tr := &http.Transport{DisableKeepAlives: true}
			defer tr.CloseIdleConnections()
			client := &http.Client{Timeout: pr.timeout, Transport: tr}
			return every(ctx, pr.every, func(time.Time) bool {
				ok := get(ctx, client, "http://"+p.addr+pr.path)
				if ctx.Err() != nil {
					return false
				}
				p.mu.Lock()
				c := p.by[pr.path]
				if ok {
					c.OK++
				} else {
					c.Failed++
					c.FailedAt = append(c.FailedAt, time.Now())
				}
				p.mu.Unlock()
				return true
			})
		})
	}
	return g.Wait()
}

// get reports whether GET url answered 200, reading the body to its end.
func get(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}

// counts returns the counts by path, failures classified against the
// slot's windows of stopping and starting.
func (p *prober) counts(windows []window) map[string]probeCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]probeCount{}
	for path, c := range p.by {
		cc := *c
		for _, at := range c.FailedAt {
			if !inAny(windows, at) {
				cc.FailedOutside++
			}
		}
		cc.FailedAt = nil
		out[path] = cc
	}
	return out
}
