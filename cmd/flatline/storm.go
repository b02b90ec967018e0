package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/storm"
)

func newStormCmd(r *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "storm",
		Short: "Inspect and release the storm guard's holds",
		Example: `  flatline storm status
  flatline storm status -o json
  flatline storm release`,
	}
	cmd.AddCommand(newStormStatusCmd(r), newStormReleaseCmd(r))
	return cmd
}

// stormStatusOptions are the flags of `flatline storm status`.
type stormStatusOptions struct {
	output outputOptions
}

func newStormStatusCmd(r *rootOptions) *cobra.Command {
	var o stormStatusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the stalled signals partitions, the hold and the storm being named",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return r.show(cmd, o.output, func(store *shard.Store) (any, func(io.Writer), error) {
				gs, err := store.ReadGate(cmd.Context())
				st := inspect.NewStormStatus(gs)
				return st, func(out io.Writer) { printStorm(out, st, time.Now()) }, err
			})
		},
	}
	o.output.register(cmd, false) // json: /status's storm object
	return cmd
}

func printStorm(out io.Writer, st inspect.StormStatus, now time.Time) {
	switch {
	case len(st.StalledPartitions) == 0:
		fmt.Fprintln(out, "stalled partitions: none")
	default:
		fmt.Fprintf(out, "stalled partitions: %v\n", st.StalledPartitions)
	}
	switch {
	case st.HeldSinceMs != nil:
		held := now.Sub(time.UnixMilli(*st.HeldSinceMs)).Round(time.Millisecond)
		fmt.Fprintf(out, "firing held: for %v (since %s)\n", held, time.UnixMilli(*st.HeldSinceMs).UTC().Format(time.RFC3339Nano))
	case st.HoldExpired:
		fmt.Fprintln(out, "firing held: no (the hold expired: storm.max_hold, or released)")
	default:
		fmt.Fprintln(out, "firing held: no")
	}
	if st.StormID != nil {
		fmt.Fprintf(out, "storm: %s\n", *st.StormID)
	} else {
		fmt.Fprintln(out, "storm: none")
	}
}

func newStormReleaseCmd(r *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "release",
		Short: "End every hold now: the deadlines the stalled partitions held fire, with a storm_id",
		Long: `release ends every hold of the storm guard at once, as storm.max_hold would:
the stalled partitions' watermarks follow probes again and the held deadlines
fire, each with a storm_id. The partitions stay stalled until records arrive.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return releaseStorm(cmd.Context(), r, cmd.OutOrStdout())
		},
	}
}

func releaseStorm(ctx context.Context, r *rootOptions, out io.Writer) error {
	_, store, closeStore, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	now := time.Now()
	n, err := store.ExpireStalls(ctx, storm.NewID(now), now.UnixMilli())
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintln(out, "no hold to release")
		return nil
	}
	fmt.Fprintf(out, "released the holds of %d stalled partitions: their held deadlines fire now\n", n)
	return nil
}
