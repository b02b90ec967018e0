package main

import (
	"context"
	"time"
)

// churn is the fleet's ordinary turnover, through the whole run (it is
// load, not a disturbance): every period some devices join, some leave
// with a tombstone and some go silent, until quietEnd before the end, so
// that the last silent device has fired before the soak stops flatline.
type churn struct {
	f                       *fleet
	every                   time.Duration
	until                   time.Time
	joinN, leaveN, silenceN int
}

func (c *churn) Run(ctx context.Context) error {
	return every(ctx, c.every, func(now time.Time) bool {
		if now.After(c.until) {
			return false
		}
		c.f.Join(c.joinN)
		c.f.Leave(c.leaveN)
		c.f.Silence(c.silenceN)
		return true
	})
}
