package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/rebalance"
)

func newShardsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "Inspect and scale the shard layout",
		Example: `  flatline shards status
  flatline shards scale --to 32`,
	}
	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the layout, per-shard size, next deadline, owner and migration progress",
		Example: `  flatline shards status
  flatline shards status --json | jq .migration`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, store, closeStore, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			st, err := rebalance.ReadStatus(cmd.Context(), store, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print the /status JSON document")
	cmd.AddCommand(status, newScaleCmd(g))
	return cmd
}

func newScaleCmd(g *globals) *cobra.Command {
	var to int
	var yes bool
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
			if !cmd.Flags().Changed("to") {
				return fmt.Errorf("--to is required: the new shard count (double or half the current one)")
			}
			_, store, closeStore, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			cur, ok, err := store.Layout(cmd.Context())
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no layout stored yet: start 'flatline serve' once first")
			}
			if err := rebalance.CheckScale(cur, to); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !yes {
				verb := "double"
				if to < cur.Count {
					verb = "halve"
				}
				fmt.Fprintf(out, "This will %s the shards: %d -> %d (layout epoch %d).\n", verb, cur.Count, to, cur.Epoch)
				fmt.Fprintln(out, "Nothing is copied now; scanners check both shards until the sweep finalizes the layout.")
				fmt.Fprint(out, "Proceed? [y/N] ")
				var answer string
				_, _ = fmt.Fscanln(cmd.InOrStdin(), &answer)
				if answer != "y" && answer != "Y" && answer != "yes" {
					return fmt.Errorf("scale cancelled")
				}
			}
			start := time.Now()
			l, err := rebalance.Scale(cmd.Context(), store, to, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "layout is now {count: %d, previous: %d, epoch: %d} (%s); the sweep finalizes it by itself\n",
				l.Count, l.Previous, l.Epoch, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "the new shard count: double or half the current one")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func printStatus(w io.Writer, st rebalance.Status) {
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
	if st.Partitions > 0 {
		fmt.Fprintf(w, "watermark: %s (lag %s over %d partitions)\n",
			time.UnixMilli(st.WatermarkMs).UTC().Format("15:04:05.000"), time.Duration(st.WatermarkLagMs)*time.Millisecond, st.Partitions)
	} else {
		fmt.Fprintln(w, "watermark: none yet (no ingest has run)")
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
