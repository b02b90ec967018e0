package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/rebalance"
)

func newShardsCmd(r *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "Inspect and scale the shard layout",
		Example: `  flatline shards status
  flatline shards scale --to 32`,
	}
	cmd.AddCommand(newStatusCmd(r), newScaleCmd(r))
	return cmd
}

// statusOptions are the flags of `flatline shards status`.
type statusOptions struct {
	output outputOptions
}

func newStatusCmd(r *rootOptions) *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the layout, per-shard size, next deadline, owner and migration progress",
		Example: `  flatline shards status
  flatline shards status -o json | jq .migration`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.Validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), r, cmd.OutOrStdout())
		},
	}
	o.output.register(cmd, true) // json: the /status document
	return cmd
}

func (o *statusOptions) run(ctx context.Context, r *rootOptions, out io.Writer) error {
	// A read command, so connected as connectReader does; the client is
	// kept for the deployment's description.
	cfg, rdb, store, err := r.dial(ctx, app.ConnectReader)
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	now := time.Now()
	st, err := inspect.ReadStatus(ctx, store, now)
	if err != nil {
		return err
	}
	rs := redisconn.ReadStatus(ctx, rdb, cfg.Redis)
	st.Redis = &rs
	if err := st.ReadDown(ctx, store, cfg.Dispatch.RecoveryWindow, now); err != nil {
		return err
	}
	if err := st.ReadMaintenance(ctx, store, now); err != nil {
		return err
	}
	if o.output.JSON() {
		return writeJSON(out, st)
	}
	printStatus(out, st)
	return nil
}

// scaleOptions are the flags of `flatline shards scale`.
type scaleOptions struct {
	to    int
	toSet bool // --to was given: no default count is safe to scale to
	yes   bool
}

// Validate checks what can be checked without Redis; whether --to may
// follow the current layout is rebalance.CheckScale's to say.
func (o *scaleOptions) Validate() error {
	if !o.toSet {
		return fmt.Errorf("--to is required: the new shard count (double or half the current one)")
	}
	return nil
}

func newScaleCmd(r *rootOptions) *cobra.Command {
	var o scaleOptions
	cmd := &cobra.Command{
		Use:   "scale --to N",
		Short: "Double (or halve) the shard count without moving data up front",
		Long: `scale stores the layout {count: N, previous: current} and returns at once. Ingest writes
with the new count within a second; a device moves at most from shard i to i+N/2 (doubling);
scanners check both places, and a background sweep moves what is left and finalizes the
layout by itself. Follow it with 'flatline shards status'.`,
		Example: `  flatline shards scale --to 32
  flatline shards scale --to 32 --yes     # no confirmation prompt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.toSet = cmd.Flags().Changed("to")
			if err := o.Validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), r, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&o.to, "to", 0, "the new shard count: double or half the current one")
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func (o *scaleOptions) run(ctx context.Context, r *rootOptions, in io.Reader, out io.Writer) error {
	_, store, closeStore, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	// Checked here as well as in rebalance.Scale so the prompt can name the
	// current layout, and a refused scale asks nothing.
	cur, ok, err := store.Layout(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no layout stored yet: start 'flatline serve' once first")
	}
	if err := rebalance.CheckScale(cur, o.to); err != nil {
		return err
	}
	if !o.yes {
		verb := "double"
		if o.to < cur.Count {
			verb = "halve"
		}
		fmt.Fprintf(out, "This will %s the shards: %d -> %d (layout epoch %d).\n", verb, cur.Count, o.to, cur.Epoch)
		fmt.Fprintln(out, "Nothing is copied now; scanners check both shards until the sweep finalizes the layout.")
		fmt.Fprint(out, "Proceed? [y/N] ")
		var answer string
		_, _ = fmt.Fscanln(in, &answer)
		if answer != "y" && answer != "Y" && answer != "yes" {
			return fmt.Errorf("scale cancelled")
		}
	}
	start := time.Now()
	l, err := rebalance.Scale(ctx, store, o.to, start)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "layout is now {count: %d, previous: %d, epoch: %d} (%s); the sweep finalizes it by itself\n",
		l.Count, l.Previous, l.Epoch, time.Since(start).Round(time.Millisecond))
	return nil
}

func printStatus(w io.Writer, st inspect.Status) {
	l := st.Layout
	if l.Count == 0 {
		fmt.Fprintln(w, "no layout stored yet (start 'flatline serve' once)")
		return
	}
	fmt.Fprintf(w, "layout: %d shards (epoch %d, since %s)\n", l.Count, l.Epoch, time.UnixMilli(l.SinceMs).UTC().Format(time.RFC3339))
	if st.Migration.Active {
		fmt.Fprintf(w, "migration: %d -> %d, %d misplaced members left, %.1f%% done\n", l.Previous, l.Count, st.Migration.Misplaced, 100*st.Migration.Progress)
	} else {
		fmt.Fprintln(w, "migration: none")
	}
	fmt.Fprintf(w, "tracked devices: %d\n", st.Tracked)
	fmt.Fprintf(w, "devices down: %d (timed out within dispatch.recovery_window)\n", st.Down)
	if len(st.Maintenance) > 0 {
		var held int64
		for _, mw := range st.Maintenance {
			held += mw.Held
		}
		fmt.Fprintf(w, "maintenance windows open: %d, devices held: %d (flatline maintenance list)\n", len(st.Maintenance), held)
	}
	if st.Partitions > 0 {
		fmt.Fprintf(w, "watermark: %s (lag %s over %d partitions)\n",
			time.UnixMilli(st.WatermarkMs).UTC().Format("15:04:05.000"), time.Duration(st.WatermarkLagMs)*time.Millisecond, st.Partitions)
	} else {
		fmt.Fprintln(w, "watermark: none yet (no ingest has run)")
	}
	if r := st.Redis; r != nil && r.Error != "" {
		fmt.Fprintf(w, "redis: %s (%s)\n", r.Mode, r.Error)
	} else if r != nil {
		fmt.Fprintf(w, "redis: %s, maxmemory-policy %s, persistence %s, %d replicas\n", r.Mode, r.MaxmemoryPolicy, r.Persistence, r.Replicas)
	}
	fmt.Fprintf(w, "instances: %v\n\n", st.Instances)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shard\tdevices\tnext deadline\towner\t")
	for _, s := range st.Shards {
		next := "-"
		if s.NextDeadlineMs > 0 {
			next = time.UnixMilli(s.NextDeadlineMs).UTC().Format("15:04:05.000")
		}
		owner := s.Owner
		if owner == "" {
			owner = "(none)"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t\n", s.Shard, s.Size, next, owner)
	}
	_ = tw.Flush()
}
