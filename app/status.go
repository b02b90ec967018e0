package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/httpapi"
	"github.com/flatline-dev/flatline/internal/redisconn"
)

// ready answers /readyz: the instance can serve when Redis answers, the
// layout is loaded, the schema registry answers (format avro) and Kafka
// answers, whatever roles it runs. Every call ends by ctx's deadline (the
// Redis client honours it), so a Redis that does not answer at all is
// reported as such, in time.
func (a *App) ready(ctx context.Context) error {
	if a.Ingest != nil {
		// What ingest's own calls already know needs no ping to wait for.
		if d, err := a.Ingest.RedisUnanswered(); d > 0 {
			if err != nil {
				return fmt.Errorf("redis: no answer to ingest for %v (%w)", d.Round(time.Millisecond), err)
			}
			return fmt.Errorf("redis: no answer to ingest for %v", d.Round(time.Millisecond))
		}
	}
	if err := a.Store.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("redis: no answer within %v (%w)", httpapi.ReadyTimeout, err)
		}
		return fmt.Errorf("redis: %w", err)
	}
	if a.Watcher.Current().Count == 0 {
		return errors.New("layout not loaded")
	}
	if a.Ingest != nil {
		// Format avro: ingest holds while the registry cannot be reached.
		if err := a.Ingest.SchemaRegistryHealthy(); err != nil {
			return err
		}
	}
	return checkKafka(ctx, a.kafka, a.cfg)
}

// status answers /status: the same document as `flatline shards status
// --json`, read from Redis, with this instance's id.
func (a *App) status(ctx context.Context) (any, error) {
	now := time.Now()
	st, err := inspect.ReadStatus(ctx, a.Store, now)
	if err != nil {
		return nil, err
	}
	if err := st.ReadDown(ctx, a.Store, a.cfg.Dispatch.RecoveryWindow, now); err != nil {
		return nil, err
	}
	if err := st.ReadMaintenance(ctx, a.Store, now); err != nil {
		return nil, err
	}
	st.Instance = a.id
	rs := redisconn.ReadStatus(ctx, a.rdb, a.cfg.Redis)
	st.Redis = &rs
	return st, nil
}

// devicesDown answers GET /devices/down: a page of what `flatline devices
// down -o json` prints for the same --class, with the cursor of the next.
func (a *App) devicesDown(ctx context.Context, q httpapi.DevicesDownQuery) (any, error) {
	return inspect.ListDown(ctx, a.Store, a.policy, inspect.DownQuery{
		Class: q.Class, Parent: q.Parent, Limit: q.Limit, Cursor: q.Cursor, Window: a.cfg.Dispatch.RecoveryWindow, Pad: a.cfg.Ingest.CoalesceWindow,
	}, time.Now())
}
