package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/rebalance"
)

func newDeviceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "device",
		Short:   "Inspect one device",
		Example: `  flatline device get d-42 --json`,
	}
	var asJSON bool
	get := &cobra.Command{
		Use:     "get ID",
		Short:   "Show whether a device is tracked, its shard, deadline, and since when it is down",
		Example: `  flatline device get d-42`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, store, closeStore, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			policy, err := app.LoadPolicy(cmd.Context(), store, cfg.Timeouts)
			if err != nil {
				return err
			}
			d, err := rebalance.GetDevice(cmd.Context(), store, policy, args[0], cfg.Ingest.CoalesceWindow)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(d)
			}
			fmt.Fprintf(out, "device:   %s\n", d.DeviceID)
			fmt.Fprintf(out, "tracked:  %v\n", d.Tracked)
			fmt.Fprintf(out, "shard:    %d\n", d.Shard)
			if d.Tracked {
				fmt.Fprintf(out, "deadline: %s (in %s)\n", fmtMs(d.DeadlineMs), time.Until(time.UnixMilli(d.DeadlineMs)).Round(time.Millisecond))
				fmt.Fprintf(out, "timeout:  %s\n", time.Duration(d.TimeoutMs)*time.Millisecond)
				if d.Class != "" {
					fmt.Fprintf(out, "class:    %s\n", d.Class)
				}
			}
			if d.DownSinceMs > 0 {
				fmt.Fprintf(out, "timed out since: %s\n", fmtMs(d.DownSinceMs))
			}
			return nil
		},
	}
	get.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(get)
	return cmd
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
