package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

const (
	asynqSystem = "asynq"
	asynqConns  = 32 // goroutines issuing enqueues/resets
)

// asynqDetails is the asynq peer's JSON detail.
type asynqDetails struct {
	Tasks            int         `json:"reset_tasks"`
	EnqueuePerSecond float64     `json:"enqueue_per_second"`
	ResetsPerSecond  float64     `json:"resets_per_second"`
	ResetErrors      int64       `json:"reset_errors"`
	SparseDefault    sample.Dist `json:"sparse_default_config"`
	SparseTuned      sample.Dist `json:"sparse_tuned_config"`
	SparseWanted     int         `json:"sparse_wanted"`
	MassTasks        int         `json:"mass_tasks"`
	MassHandled      int         `json:"mass_handled"`
	MassFirstS       float64     `json:"mass_first_after_deadline_seconds"`
	MassLastS        float64     `json:"mass_last_after_deadline_seconds"`
	MassPerSecond    float64     `json:"mass_events_per_second"`
	MassLoadEndS     float64     `json:"mass_load_end_before_deadline_seconds"`
	LossTasks        int         `json:"loss_tasks"`
	LossHandled      int         `json:"loss_handled"`
	LossLastS        float64     `json:"loss_last_after_window_seconds"`
	Tuned            string      `json:"tuned_config"`
	Concurrency      int         `json:"server_concurrency"`
}

// tuned is asynq set up for timeliness: it polls for due scheduled tasks
// (DelayedTaskCheckInterval, default 5s) and for pending tasks when idle
// (TaskCheckInterval, default 1s) every 100 ms, like flatline's
// scanner.interval.
func tuned(queue string, concurrency int) asynq.Config {
	return asynq.Config{
		Queues: map[string]int{queue: 1}, Concurrency: concurrency, LogLevel: asynq.ErrorLevel,
		DelayedTaskCheckInterval: 100 * time.Millisecond, TaskCheckInterval: 100 * time.Millisecond,
	}
}

func runAsynq(ctx context.Context, o *options) ([]Row, *asynqDetails, error) {
	rdb := redis.NewClient(&redis.Options{Addr: o.redis, PoolSize: asynqConns + 8})
	defer rdb.Close()
	d := &asynqDetails{Tasks: o.asynqTasks, SparseWanted: o.sparse, MassTasks: o.massAsynq, Concurrency: 64,
		Tuned: "DelayedTaskCheckInterval 100ms, TaskCheckInterval 100ms (defaults 5s, 1s)"}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, d, err
	}
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	conn := asynq.RedisClientOpt{Addr: o.redis}
	var rows []Row

	// Resets: delete the scheduled task and enqueue it again, later.
	status("asynq: %d scheduled tasks, resets for %s", o.asynqTasks, o.resetFor)
	ids := sample.DeviceIDs("dev-", o.asynqTasks)
	t0 := time.Now()
	if err := parallel(len(ids), func(k int) error {
		_, err := client.Enqueue(asynq.NewTask("timeout", nil), asynq.TaskID(ids[k]), asynq.Queue("resets"), asynq.ProcessIn(time.Hour))
		return err
	}); err != nil {
		return nil, d, err
	}
	d.EnqueuePerSecond = float64(len(ids)) / time.Since(t0).Seconds()
	var resets, resetErrs atomic.Int64
	var cursor atomic.Int64
	rctx, cancel := context.WithTimeout(ctx, o.resetFor)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < asynqConns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rctx.Err() == nil {
				id := ids[int(cursor.Add(1)-1)%len(ids)]
				if err := insp.DeleteTask("resets", id); err != nil {
					resetErrs.Add(1)
					continue
				}
				if _, err := client.Enqueue(asynq.NewTask("timeout", nil), asynq.TaskID(id), asynq.Queue("resets"), asynq.ProcessIn(time.Hour)); err != nil {
					resetErrs.Add(1)
					continue
				}
				resets.Add(1)
			}
		}()
	}
	wg.Wait()
	cancel()
	d.ResetsPerSecond = float64(resets.Load()) / time.Since(start).Seconds()
	d.ResetErrors = resetErrs.Load()
	rows = append(rows, Row{System: asynqSystem, Metric: fmt.Sprintf("resets/s (DeleteTask + Enqueue TaskID ProcessIn, %d goroutines)", asynqConns), Value: d.ResetsPerSecond, Unit: "/s"})

	// Sparse: the default configuration and the tuned one side by side,
	// each on its own queue.
	status("asynq: %d deadlines over %s, default and tuned servers", o.sparse, o.spread)
	first := time.Now().Add(time.Second).UnixMilli()
	deadlineOf := func(k int) int64 { return first + int64(k)*o.spread.Milliseconds()/int64(o.sparse) }
	defRec, tunRec := newRecorder(), newRecorder()
	defCfg := asynq.Config{Queues: map[string]int{"sparse_default": 1}, Concurrency: 16, LogLevel: asynq.ErrorLevel}
	srvDef := asynq.NewServer(conn, defCfg)
	srvTun := asynq.NewServer(conn, tuned("sparse_tuned", 16))
	if err := srvDef.Start(defRec); err != nil {
		return rows, d, err
	}
	if err := srvTun.Start(tunRec); err != nil {
		srvDef.Shutdown()
		return rows, d, err
	}
	probes := sample.DeviceIDs("probe-", o.sparse)
	if err := parallel(2*o.sparse, func(k int) error {
		q := "sparse_default"
		if k >= o.sparse {
			q, k = "sparse_tuned", k-o.sparse
		}
		return enqueueAt(client, q, probes[k], deadlineOf(k))
	}); err != nil {
		return rows, d, err
	}
	waitUntil(time.UnixMilli(first).Add(o.spread+sparseWait), func() bool {
		return defRec.count() >= o.sparse && tunRec.count() >= o.sparse
	})
	srvDef.Shutdown()
	srvTun.Shutdown()
	d.SparseDefault, d.SparseTuned = sample.DistOf(defRec.late()), sample.DistOf(tunRec.late())
	rows = append(rows, latencyRows(asynqSystem, fmt.Sprintf("sparse: %d deadlines, default config", o.sparse), d.SparseDefault, o.sparse, "")...)
	rows = append(rows, latencyRows(asynqSystem, fmt.Sprintf("sparse: %d deadlines, tuned 100ms polling", o.sparse), d.SparseTuned, o.sparse, "")...)

	// Mass expiry.
	margin := time.Second + time.Duration(1.5*float64(o.massAsynq)/d.EnqueuePerSecond*float64(time.Second))
	// A whole second: asynq keeps whole Unix seconds and would otherwise
	// start up to a second early.
	deadline := time.Now().Add(margin).Truncate(time.Second).Add(time.Second)
	status("asynq: %d tasks due at once (+%s), tuned server, concurrency %d", o.massAsynq, margin.Round(time.Millisecond), d.Concurrency)
	massRec := newRecorder()
	srvMass := asynq.NewServer(conn, tuned("mass", d.Concurrency))
	if err := srvMass.Start(massRec); err != nil {
		return rows, d, err
	}
	mids := sample.DeviceIDs("m-", o.massAsynq)
	if err := parallel(len(mids), func(k int) error { return enqueueAt(client, "mass", mids[k], deadline.UnixMilli()) }); err != nil {
		srvMass.Shutdown()
		return rows, d, err
	}
	d.MassLoadEndS = time.Until(deadline).Seconds()
	waitUntil(deadline.Add(90*time.Second), func() bool { return massRec.count() >= o.massAsynq })
	srvMass.Shutdown()
	d.MassHandled = massRec.count()
	if firstAt, lastAt := massRec.span(); d.MassHandled > 0 {
		d.MassFirstS = firstAt.Sub(deadline).Seconds()
		d.MassLastS = lastAt.Sub(deadline).Seconds()
		d.MassPerSecond = float64(d.MassHandled) / d.MassLastS
	}
	rows = append(rows,
		Row{System: asynqSystem, Metric: fmt.Sprintf("mass: %s tasks due at once (tuned, concurrency %d), handled", fmtInt(o.massAsynq), d.Concurrency), Value: float64(d.MassHandled), Unit: "events"},
		Row{System: asynqSystem, Metric: "mass: deadline → last handled", Value: d.MassLastS, Unit: "s"},
		Row{System: asynqSystem, Metric: "mass: drain rate", Value: d.MassPerSecond, Unit: "events/s"},
	)
	if d.MassFirstS < 0 {
		rows = append(rows, Row{System: asynqSystem, Metric: "mass: first handled BEFORE the deadline by", Value: -d.MassFirstS, Unit: "s", Note: "scores are whole Unix seconds"})
	}

	// Loss: the worker is away for o.gap in the middle of a stream.
	const lossTasks, lossWindow = 1000, 4 * time.Second
	status("asynq: %d deadlines over %s, worker away for %s", lossTasks, lossWindow, o.gap)
	lossRec := newRecorder()
	lfirst := time.Now().Add(time.Second)
	srvLoss := asynq.NewServer(conn, tuned("loss", 16))
	if err := srvLoss.Start(lossRec); err != nil {
		return rows, d, err
	}
	lids := sample.DeviceIDs("loss-", lossTasks)
	if err := parallel(lossTasks, func(k int) error {
		return enqueueAt(client, "loss", lids[k], lfirst.UnixMilli()+int64(k)*lossWindow.Milliseconds()/lossTasks)
	}); err != nil {
		srvLoss.Shutdown()
		return rows, d, err
	}
	time.Sleep(time.Until(lfirst.Add((lossWindow - o.gap) / 2)))
	srvLoss.Shutdown()
	time.Sleep(o.gap)
	srvLoss = asynq.NewServer(conn, tuned("loss", 16))
	if err := srvLoss.Start(lossRec); err != nil {
		return rows, d, err
	}
	waitUntil(lfirst.Add(lossWindow+10*time.Second), func() bool { return lossRec.count() >= lossTasks })
	srvLoss.Shutdown()
	d.LossTasks, d.LossHandled = lossTasks, lossRec.count()
	if _, lastAt := lossRec.span(); d.LossHandled > 0 {
		d.LossLastS = lastAt.Sub(lfirst.Add(lossWindow)).Seconds()
	}
	rows = append(rows, Row{System: asynqSystem, Metric: fmt.Sprintf("events lost while the worker is away %s (of %d over %s)", o.gap, lossTasks, lossWindow),
		Value: float64(lossTasks - d.LossHandled), Unit: "events", Note: "due tasks wait in Redis"})
	return rows, d, nil
}

// enqueueAt schedules the task of device id for deadline (Unix ms); the
// payload carries the deadline so the handler can measure lateness.
func enqueueAt(c *asynq.Client, queue, id string, deadlineMs int64) error {
	payload := binary.BigEndian.AppendUint64(nil, uint64(deadlineMs))
	_, err := c.Enqueue(asynq.NewTask("timeout", payload), asynq.TaskID(id), asynq.Queue(queue), asynq.ProcessAt(time.UnixMilli(deadlineMs)))
	return err
}

// recorder is a handler that notes when each task ran against its deadline.
type recorder struct {
	mu          sync.Mutex
	seen        map[string]bool
	lateMs      []float64
	first, last time.Time
}

func newRecorder() *recorder { return &recorder{seen: map[string]bool{}} }

func (r *recorder) ProcessTask(ctx context.Context, t *asynq.Task) error {
	now := time.Now()
	id, _ := asynq.GetTaskID(ctx)
	if len(t.Payload()) != 8 {
		return errors.New("bad payload")
	}
	deadline := int64(binary.BigEndian.Uint64(t.Payload()))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[id] {
		return nil
	}
	r.seen[id] = true
	r.lateMs = append(r.lateMs, float64(now.UnixMicro())/1e3-float64(deadline))
	if r.first.IsZero() || now.Before(r.first) {
		r.first = now
	}
	if now.After(r.last) {
		r.last = now
	}
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lateMs)
}

func (r *recorder) late() []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]float64(nil), r.lateMs...)
}

func (r *recorder) span() (time.Time, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.last
}

// parallel runs fn(0..n-1) on asynqConns goroutines; the first error wins.
func parallel(n int, fn func(k int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Value
	for w := 0; w < asynqConns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= n || first.Load() != nil {
					return
				}
				if err := fn(k); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e, ok := first.Load().(error); ok {
		return e
	}
	return nil
}
