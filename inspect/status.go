package inspect

import (
	"context"
	"slices"
	"time"

	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/shard"
)

// Status is the document of `flatline shards status --json` and /status.
type Status struct {
	Instance       string       `json:"instance,omitempty"`
	Layout         shard.Layout `json:"layout"`
	Migration      Migration    `json:"migration"`
	WatermarkMs    int64        `json:"watermark_ms"`
	WatermarkLagMs int64        `json:"watermark_lag_ms"`
	Partitions     int          `json:"partitions"`
	Tracked        int64        `json:"tracked"`
	// Down is how many devices timed out within dispatch.recovery_window
	// and have not beaten since, as CountDown counts them (set by ReadDown).
	Down      int64    `json:"down"`
	Instances []string `json:"instances"`
	// Redis describes the deployment (filled by the callers that know its
	// configuration: /status and `shards status`).
	Redis *redisconn.Status `json:"redis,omitempty"`
	// Storm is the storm guard's state (package storm).
	Storm StormStatus `json:"storm"`
	// Maintenance lists the open maintenance windows (package
	// maintenance), set by ReadMaintenance.
	Maintenance []WindowStatus `json:"maintenance"`
	Shards      []ShardStatus  `json:"shards"`
}

// StormStatus is /status's storm object: the stalled signals partitions,
// since when firing is held (null when it is not) and the storm being named
// (null when none is).
type StormStatus struct {
	StalledPartitions []int   `json:"stalled_partitions"`
	HeldSinceMs       *int64  `json:"held_since_ms"`
	StormID           *string `json:"storm_id"`
	// HoldExpired says a hold outlived storm.max_hold (or was released):
	// its partitions are still stalled, and no longer hold firing.
	HoldExpired bool `json:"hold_expired,omitempty"`
}

// NewStormStatus builds the storm object from the watermarks hash.
func NewStormStatus(gs shard.GateState) StormStatus {
	st := StormStatus{StalledPartitions: make([]int, 0, len(gs.Stalls))}
	for p := range gs.Stalls {
		st.StalledPartitions = append(st.StalledPartitions, p)
	}
	slices.Sort(st.StalledPartitions)
	if gs.Hold != nil {
		if gs.Hold.Expired {
			st.HoldExpired = true
		} else {
			since := gs.Hold.SinceMs
			st.HeldSinceMs = &since
		}
	}
	if gs.Storm != nil {
		id := gs.Storm.ID
		st.StormID = &id
	}
	return st
}

// Migration is the progress of a doubling or halving.
type Migration struct {
	Active    bool  `json:"active"`
	Misplaced int64 `json:"misplaced"`
	// Moved is how many members the sweeper moved so far.
	Moved int64 `json:"moved"`
	// Progress is moved / (moved + misplaced): 1 when no migration runs.
	Progress float64 `json:"progress"`
}

// ShardStatus describes one shard.
type ShardStatus struct {
	Shard          int    `json:"shard"`
	Size           int64  `json:"size"`
	NextDeadlineMs int64  `json:"next_deadline_ms,omitempty"`
	Owner          string `json:"owner"`
}

// ReadStatus reads the status from Redis, all but Down (see ReadDown). It
// writes nothing.
func ReadStatus(ctx context.Context, store *shard.Store, now time.Time) (Status, error) {
	l, _, err := store.Layout(ctx)
	if err != nil {
		return Status{}, err
	}
	st := Status{Layout: l}
	n := l.Shards()
	if n == 0 {
		return st, nil
	}
	sizes, err := store.Sizes(ctx, n)
	if err != nil {
		return Status{}, err
	}
	owners, err := store.LeaseOwners(ctx, n)
	if err != nil {
		return Status{}, err
	}
	st.Shards = make([]ShardStatus, n)
	for i := 0; i < n; i++ {
		ss := ShardStatus{Shard: i, Size: sizes[i], Owner: owners[i]}
		if m, ok, err := store.Next(ctx, i); err == nil && ok {
			ss.NextDeadlineMs, _ = shard.DecodeScore(m.Score)
		}
		st.Tracked += sizes[i]
		st.Shards[i] = ss
	}
	gs, err := store.ReadGate(ctx)
	if err != nil {
		return Status{}, err
	}
	st.Partitions = gs.Partitions
	st.Storm = NewStormStatus(gs)
	if min, ok := shard.MinWatermark(gs.Watermarks, gs.Partitions); ok {
		st.WatermarkMs = min
		st.WatermarkLagMs = now.UnixMilli() - min
	}
	st.Instances, _ = store.Instances(ctx)
	st.Migration.Progress = 1
	if l.Migrating() {
		st.Migration.Active = true
		st.Migration.Progress = 0
		// The sweeper's last account, when it is about this migration;
		// otherwise count (one pass over the shards).
		prog, ok, err := store.GetProgress(ctx)
		if err != nil {
			return Status{}, err
		}
		if ok && prog.Epoch == l.Epoch && prog.Misplaced >= 0 {
			st.Migration.Misplaced = prog.Misplaced
			st.Migration.Moved = prog.Moved
		} else if st.Migration.Misplaced, _, err = CountMisplaced(ctx, store, l); err != nil {
			return Status{}, err
		}
		if done := st.Migration.Moved + st.Migration.Misplaced; done > 0 {
			st.Migration.Progress = float64(st.Migration.Moved) / float64(done)
		}
	}
	return st, nil
}

// ReadMaintenance sets st.Maintenance: the windows open at now, with how
// many devices each holds.
func (st *Status) ReadMaintenance(ctx context.Context, store *shard.Store, now time.Time) (err error) {
	st.Maintenance, err = Maintenance(ctx, store, false, now)
	return err
}

// ReadDown sets st.Down: the devices of st's shards that timed out within
// window (dispatch.recovery_window) and have not beaten since. One ZCOUNT
// per shard; it writes nothing.
func (st *Status) ReadDown(ctx context.Context, store *shard.Store, window time.Duration, now time.Time) error {
	down, err := store.DownSince(ctx, st.Layout.Shards(), DownSince(window, now))
	if err != nil {
		return err
	}
	st.Down = 0
	for _, c := range down {
		st.Down += c
	}
	return nil
}
