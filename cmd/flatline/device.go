package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/inspect"
)

// deviceGetOptions are the flags of `flatline device get`.
type deviceGetOptions struct {
	output outputOptions
}

func newDeviceCmd(r *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "device",
		Short:   "Inspect one device",
		Example: `  flatline device get d-42 -o json`,
	}
	var o deviceGetOptions
	get := &cobra.Command{
		Use:     "get ID",
		Short:   "Show whether a device is tracked, its shard, deadline, and since when it is down",
		Example: `  flatline device get d-42`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.Validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), r, args[0], cmd.OutOrStdout())
		},
	}
	o.output.register(get, true)
	cmd.AddCommand(get)
	return cmd
}

func (o *deviceGetOptions) run(ctx context.Context, r *rootOptions, id string, out io.Writer) error {
	cfg, store, policy, closeStore, err := r.readDevices(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	d, err := inspect.GetDevice(ctx, store, policy, id, cfg.Ingest.CoalesceWindow)
	if err != nil {
		return err
	}
	if o.output.JSON() {
		return writeJSON(out, d)
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
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
