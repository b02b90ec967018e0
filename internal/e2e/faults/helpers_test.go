package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const (
	signals  = "device-signals"
	timeouts = "device-timeouts"
	dlq      = "device-signals-dlq"
)

// binDir holds the flatline binary built once per test run (TestMain removes it).
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flatline-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// flatlineBinary builds ./cmd/flatline (without -race: the child is the
// system under test, not the test) once per test run and returns its path.
func flatlineBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "flatline")
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		start := time.Now()
		cmd := exec.Command(goTool, "build", "-o", bin, "github.com/flatline-dev/flatline/cmd/flatline")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/flatline: %v\n%s", err, out)
			return
		}
		t.Logf("built %s in %v", bin, time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// seed returns the random seed of a test: FLATLINE_FAULTS_SEED when set (to
// replay a failure), else a fresh one. It is logged either way.
func seed(t *testing.T) *rand.Rand {
	t.Helper()
	s := rand.Uint64()
	if v := os.Getenv("FLATLINE_FAULTS_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("FLATLINE_FAULTS_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with FLATLINE_FAULTS_SEED=%d)", s, s)
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// waitUntil polls cond every 20ms until it holds, failing the test with
// what after timeout. It is for black-box conditions (a child process, a
// broker) that offer no signal to wait on.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleepUntil sleeps until at (a point in a test's timeline).
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// ---- configuration and in-process instances ----

// baseConfig is a test configuration against one Redis and Kafka, with a
// private key prefix and consumer group, HTTP off.
func baseConfig(t *testing.T, redisAddr string, brokers []string) configs.Config {
	cfg := configs.Default()
	cfg.Redis.Addrs = []string{redisAddr}
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.GroupID = "flatline-" + cfg.Redis.KeyPrefix
	cfg.Kafka.SessionTimeout = 2 * time.Second
	cfg.HTTP.Addr = ""
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

// logBuffer keeps a process's log lines (the last max of them) for the
// report of a failed test, and lets a test watch for a line.
type logBuffer struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	max     int
	dropped int
	watch   []func(string)
}

func newLogBuffer(max int) *logBuffer { return &logBuffer{max: max} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		line := string(b.partial[:i])
		b.partial = b.partial[i+1:]
		for _, w := range b.watch {
			w(line)
		}
		if len(b.lines) == b.max {
			b.lines = b.lines[1:]
			b.dropped++
		}
		b.lines = append(b.lines, line)
	}
	return len(p), nil
}

// Note adds a line of the test's own, such as an incarnation marker.
func (b *logBuffer) Note(format string, args ...any) {
	_, _ = b.Write([]byte("---- " + fmt.Sprintf(format, args...) + "\n"))
}

// Watch calls fn with every line written from now on (under the buffer's
// lock: fn must not block).
func (b *logBuffer) Watch(fn func(string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watch = append(b.watch, fn)
}

// Count returns how many kept lines contain s.
func (b *logBuffer) Count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// dumpOnFailure logs the kept lines at the end of a failed test.
func (b *logBuffer) dumpOnFailure(t *testing.T, name string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		t.Logf("---- %s log (%d earlier lines dropped) ----\n%s", name, b.dropped, strings.Join(b.lines, "\n"))
	})
}

// instance is an in-process flatline (app.New + Run).
type instance struct {
	*app.App
	log  *logBuffer
	done chan struct{}
	err  error // Run's result, set before done closes
	stop func() error
}

// startApp starts an in-process instance whose info log is kept for the
// failure report; it is stopped in t.Cleanup.
func startApp(t *testing.T, cfg configs.Config) *instance {
	t.Helper()
	logs := newLogBuffer(2000)
	logs.dumpOnFailure(t, "flatline")
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, log, app.Hooks{})
	if err != nil {
		cancel()
		t.Fatalf("start flatline: %v", err)
	}
	inst := &instance{App: a, log: logs, done: make(chan struct{})}
	go func() {
		inst.err = a.Run(ctx)
		close(inst.done)
	}()
	var once sync.Once
	inst.stop = func() error {
		once.Do(func() {
			cancel()
			<-inst.done
		})
		return inst.err
	}
	t.Cleanup(func() { _ = inst.stop() })
	return inst
}

// exited reports whether Run returned (it must not, before the test stops it).
func (i *instance) exited() bool {
	select {
	case <-i.done:
		return true
	default:
		return false
	}
}

// ---- heartbeat load ----

// fleetConfig describes a simulated fleet: every device beats every
// interval, until its silentAt time when it has one.
type fleetConfig struct {
	brokers  []string
	devices  int
	interval time.Duration
	// silentAt maps a device index to the moment it stops beating.
	silentAt map[int]time.Time
	idPrefix string
}

// fleet produces the heartbeats of a fleetConfig into the signals topic.
type fleet struct {
	cfg fleetConfig
	ids []string

	mu      sync.Mutex
	last    map[string]int64 // silent devices: ts of the newest acknowledged heartbeat
	rounds  int
	maxLag  time.Duration // longest time from a round's ts to the next round's ack
	werr    error
	stopped chan struct{}
	cancel  context.CancelFunc
}

func startFleet(t *testing.T, cfg fleetConfig) *fleet {
	t.Helper()
	f := &fleet{cfg: cfg, last: make(map[string]int64), stopped: make(chan struct{})}
	f.ids = make([]string, cfg.devices)
	for i := range f.ids {
		f.ids[i] = fmt.Sprintf("%s%05d", cfg.idPrefix, i)
	}
	w := &kafka.Writer{
		Addr: kafka.TCP(cfg.brokers...), Topic: signals, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchSize: 10000, BatchBytes: 16 << 20, BatchTimeout: time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() {
		defer close(f.stopped)
		defer w.Close()
		tick := time.NewTicker(cfg.interval)
		defer tick.Stop()
		msgs := make([]kafka.Message, 0, cfg.devices)
		var prevTS time.Time
		for {
			now := time.Now()
			msgs = msgs[:0]
			ms := now.UnixMilli()
			for i, id := range f.ids {
				if at, ok := cfg.silentAt[i]; ok && !now.Before(at) {
					continue
				}
				msgs = append(msgs, kafka.Message{
					Key:   []byte(id),
					Value: []byte(`{"device_id":"` + id + `","ts":` + strconv.FormatInt(ms, 10) + `}`),
					Time:  now,
				})
			}
			err := w.WriteMessages(ctx, msgs...)
			if ctx.Err() != nil {
				return
			}
			f.mu.Lock()
			if err != nil {
				f.werr = err
				f.mu.Unlock()
				return
			}
			f.rounds++
			if !prevTS.IsZero() {
				f.maxLag = max(f.maxLag, time.Since(prevTS))
			}
			prevTS = now
			for i := range cfg.silentAt {
				if now.Before(cfg.silentAt[i]) {
					f.last[f.ids[i]] = ms
				}
			}
			f.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(f.stop)
	return f
}

// stop ends the load and waits for the producer to close.
func (f *fleet) stop() {
	f.cancel()
	<-f.stopped
}

// Rounds is how many rounds of heartbeats Kafka acknowledged.
func (f *fleet) Rounds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rounds
}

// result returns what the fleet did, for the verdict: the newest heartbeat
// time of each silent device, and the longest gap a live device saw between
// a heartbeat's time and the acknowledgement of its next one.
func (f *fleet) result(t *testing.T) (last map[string]int64, maxLag time.Duration) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.werr != nil {
		t.Fatalf("fleet: produce heartbeats: %v", f.werr)
	}
	return maps(f.last), f.maxLag
}

func maps[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// silentSchedule picks n of devices to go silent at uniformly random
// moments within [from, to).
func silentSchedule(rng *rand.Rand, devices, n int, from, to time.Time) map[int]time.Time {
	out := make(map[int]time.Time, n)
	span := to.Sub(from)
	for _, i := range rng.Perm(devices)[:n] {
		out[i] = from.Add(time.Duration(rng.Int64N(int64(span))))
	}
	return out
}

// ---- reading events back ----

// received is one event read back from the timeouts topic.
type received struct {
	key       string
	partition int
	offset    int64
	ev        dispatch.Event
}

// collector reads every partition of the timeouts topic from the start,
// riding out broker errors (it reads through the Kafka outage test).
type collector struct {
	brokers    []string
	partitions int
	next       []atomic.Int64 // per partition, the offset after the last read

	mu     sync.Mutex
	events []received
	errs   int
	bad    []string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func collect(t *testing.T, brokers []string, partitions int) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{brokers: brokers, partitions: partitions, next: make([]atomic.Int64, partitions), cancel: cancel}
	for p := 0; p < partitions; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: brokers, Topic: timeouts, Partition: p, MinBytes: 1, MaxBytes: 10 << 20,
			MaxWait: 50 * time.Millisecond, ReadBackoffMin: 20 * time.Millisecond, ReadBackoffMax: 200 * time.Millisecond,
		})
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer r.Close()
			for {
				m, err := r.ReadMessage(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					// A broker error (the Kafka outage test injects them):
					// the reader keeps its offset and retries.
					c.mu.Lock()
					c.errs++
					c.mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					continue
				}
				var ev dispatch.Event
				c.mu.Lock()
				if err := json.Unmarshal(m.Value, &ev); err != nil {
					c.bad = append(c.bad, fmt.Sprintf("partition %d offset %d: %q: %v", p, m.Offset, m.Value, err))
				} else {
					c.events = append(c.events, received{key: string(m.Key), partition: p, offset: m.Offset, ev: ev})
				}
				c.mu.Unlock()
				c.next[p].Store(m.Offset + 1)
			}
		}()
	}
	t.Cleanup(c.close)
	return c
}

func (c *collector) close() {
	c.cancel()
	c.wg.Wait()
}

// byDevice returns the events read so far, per device.
func (c *collector) byDevice() map[string][]received {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]received)
	for _, r := range c.events {
		out[r.ev.DeviceID] = append(out[r.ev.DeviceID], r)
	}
	return out
}

// count returns how many of ids have at least one event.
func (c *collector) count(ids map[string]bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]bool)
	for _, r := range c.events {
		if ids[r.ev.DeviceID] {
			seen[r.ev.DeviceID] = true
		}
	}
	return len(seen)
}

// drain waits until the collector has read every event the topic holds now.
func (c *collector) drain(t *testing.T) {
	t.Helper()
	end := testenv.EndOffsets(t, c.brokers, timeouts, c.partitions)
	waitUntil(t, 30*time.Second, "the collector to read the whole timeouts topic", func() bool {
		for p, off := range end {
			if c.next[p].Load() < off {
				return false
			}
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bad {
		t.Errorf("undecodable event: %s", b)
	}
}

// ---- the verdict ----

// verdict is what a fault test observed about the timeouts topic.
type verdict struct {
	timeouts   int // timeout events read
	silent     int // silent devices
	fired      int // silent devices with at least one timeout
	duplicates int // timeout events beyond the first of a device
	dupDevices int // devices with a duplicate
}

func (v verdict) String() string {
	return fmt.Sprintf("%d timeout events; %d of %d silent devices fired; %d duplicates over %d devices",
		v.timeouts, v.fired, v.silent, v.duplicates, v.dupDevices)
}

// verify checks SPEC §3 on the events read: every silent device got at
// least one timeout (exactly one when exact), for its last heartbeat, and
// every duplicate carries the original's event_id; no live device got one;
// nothing came back, so there is no recovered event.
func verify(t *testing.T, ids []string, last map[string]int64, timeout time.Duration, got map[string][]received, exact bool) verdict {
	t.Helper()
	v := verdict{silent: len(last)}
	var liveFired []string
	for _, id := range ids {
		evs := got[id]
		v.timeouts += len(evs)
		lastMs, silent := last[id]
		if !silent {
			if len(evs) > 0 {
				liveFired = append(liveFired, fmt.Sprintf("%s (%+v)", id, evs[0].ev))
			}
			continue
		}
		if len(evs) == 0 {
			t.Errorf("silent device %s (last heartbeat %d) got no timeout", id, lastMs)
			continue
		}
		v.fired++
		first := evs[0].ev
		for k, r := range evs {
			ev := r.ev
			if ev.Type != dispatch.TypeTimeout {
				t.Errorf("%s: unexpected %s event %+v", id, ev.Type, ev)
				continue
			}
			if r.key != id {
				t.Errorf("%s: event under Kafka key %q", id, r.key)
			}
			if ev.LastSeenMs != lastMs || ev.DeadlineMs != lastMs+timeout.Milliseconds() || ev.TimeoutMs != timeout.Milliseconds() {
				t.Errorf("%s: last_seen %d deadline %d timeout %d, want its last heartbeat %d + %v",
					id, ev.LastSeenMs, ev.DeadlineMs, ev.TimeoutMs, lastMs, timeout)
			}
			if ev.EventID != dispatch.TimeoutEventID(id, ev.DeadlineMs) {
				t.Errorf("%s: event_id %q", id, ev.EventID)
			}
			if ev.DetectedAtMs < ev.DeadlineMs {
				t.Errorf("%s: detected at %d, before its deadline %d", id, ev.DetectedAtMs, ev.DeadlineMs)
			}
			if k > 0 {
				v.duplicates++
				if ev.EventID != first.EventID {
					t.Errorf("%s: duplicate timeout with event_id %q, the original has %q", id, ev.EventID, first.EventID)
				}
			}
		}
		if len(evs) > 1 {
			v.dupDevices++
			if exact {
				t.Errorf("%s: %d timeouts, want exactly one", id, len(evs))
			}
		}
	}
	for id, evs := range got {
		if !slices.Contains(ids, id) {
			t.Errorf("event for unknown device %q: %+v", id, evs[0].ev)
		}
	}
	if len(liveFired) > 0 {
		slices.Sort(liveFired)
		t.Errorf("%d live devices got a timeout, e.g. %s", len(liveFired), strings.Join(liveFired[:min(5, len(liveFired))], "; "))
	}
	return v
}

// ---- Kafka inspection ----

// committed returns the group's committed offset of each partition of topic
// (-1 for none).
func committed(t *testing.T, brokers []string, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	ps := make([]int, partitions)
	for p := range ps {
		ps[p] = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	if resp.Error != nil {
		t.Fatalf("offset fetch: %v", resp.Error)
	}
	out := make(map[int]int64, partitions)
	for _, p := range resp.Topics[topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// caughtUp reports whether the group committed up to the end of every
// partition of the signals topic.
func caughtUp(t *testing.T, brokers []string, group string, partitions int) bool {
	return caughtUpTopic(t, brokers, group, signals, partitions)
}

// caughtUpTopic is caughtUp for any topic.
func caughtUpTopic(t *testing.T, brokers []string, group, topic string, partitions int) bool {
	end := testenv.EndOffsets(t, brokers, topic, partitions)
	got := committed(t, brokers, group, topic, partitions)
	for p, off := range end {
		if off > 0 && got[p] < off {
			return false
		}
	}
	return true
}

// ---- HTTP ----

// httpStatus GETs url and returns the status code (0 when unreachable).
func httpStatus(url string) int {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// httpGet returns the body of a 200 answer.
func httpGet(url string) (string, error) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// ---- child processes ----

// childEnv is the test's environment without any FLATLINE_* variable (so a
// developer's settings cannot leak in), plus vars.
func childEnv(vars map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FLATLINE_") || strings.HasPrefix(kv, "GODEBUG=") {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// proc is one run of a child flatline process.
type proc struct {
	cmd   *exec.Cmd
	done  chan struct{}
	state *os.ProcessState // set before done closes
}

// startProc starts bin with args and env, its stdout and stderr going to
// logs. It is killed in t.Cleanup if still running.
func startProc(t *testing.T, bin string, env []string, logs *logBuffer, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// terminate sends SIGTERM and returns the exit code, or -1 if the process
// had to be killed after timeout.
func (p *proc) terminate(timeout time.Duration) int {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(timeout):
		p.kill()
		return -1
	}
}

var httpAddrRE = regexp.MustCompile(`msg="http listening".* addr=(\S+)`)

// httpAddrOf watches logs for the address a child's HTTP server bound.
func httpAddrOf(logs *logBuffer) <-chan string {
	ch := make(chan string, 16)
	logs.Watch(func(line string) {
		if m := httpAddrRE.FindStringSubmatch(line); m != nil {
			select {
			case ch <- m[1]:
			default:
			}
		}
	})
	return ch
}

// ---- a kfake workaround ----

// reapGhosts works around a kfake bug until the test ends: a classic-group
// member whose connection dies while its JoinGroup waits (a process killed
// while joining) never gets a session timer in kfake, because
// (*group).reply arms it only when the reply was delivered, and the
// leader's SyncGroup clears the pending-sync timer that would otherwise
// remove it. Such a ghost keeps its share of the partitions forever and
// the live instance never reads them. A real broker expires it after the
// session timeout; so does this reaper: a member whose client connection
// no longer exists (no ESTABLISHED socket from its host:port) for longer
// than the session timeout is removed with LeaveGroup. Each reap is
// logged.
func reapGhosts(t *testing.T, brokers []string, group string, session time.Duration) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var reaped atomic.Int64
	go func() {
		defer close(done)
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
		goneSince := map[string]time.Time{}
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			resp, err := c.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
			if err != nil || len(resp.Groups) != 1 {
				continue
			}
			live := establishedLocalPorts()
			seen := map[string]bool{}
			for _, m := range resp.Groups[0].Members {
				seen[m.MemberID] = true
				_, port, err := net.SplitHostPort(m.ClientHost)
				if err != nil || live[port] {
					delete(goneSince, m.MemberID)
					continue
				}
				since, ok := goneSince[m.MemberID]
				if !ok {
					goneSince[m.MemberID] = time.Now()
					continue
				}
				if time.Since(since) < session+2*time.Second {
					continue
				}
				_, err = c.LeaveGroup(ctx, &kafka.LeaveGroupRequest{GroupID: group, Members: []kafka.LeaveGroupRequestMember{{ID: m.MemberID}}})
				if err == nil {
					reaped.Add(1)
					t.Logf("kfake workaround: removed ghost member %s (client %s gone for %v)", m.MemberID, m.ClientHost, time.Since(since).Round(time.Millisecond))
					delete(goneSince, m.MemberID)
				}
			}
			for id := range goneSince {
				if !seen[id] {
					delete(goneSince, id)
				}
			}
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() { cancel(); <-done })
		return int(reaped.Load())
	}
	t.Cleanup(func() { stop() })
	return stop
}

// establishedLocalPorts returns the local ports (decimal strings) of the
// machine's ESTABLISHED TCP sockets, from /proc/net/tcp and tcp6.
func establishedLocalPorts() map[string]bool {
	out := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "01" {
				continue
			}
			i := strings.LastIndexByte(fs[1], ':')
			if i < 0 {
				continue
			}
			if port, err := strconv.ParseUint(fs[1][i+1:], 16, 16); err == nil {
				out[strconv.FormatUint(port, 10)] = true
			}
		}
	}
	return out
}
