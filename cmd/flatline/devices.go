package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/httpapi"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
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
	fmt.Fprintf(out, "state:    %s\n", d.State)
	if d.Parent != "" {
		fmt.Fprintf(out, "parent:   %s\n", d.Parent)
	}
	if d.MaintenanceID != "" {
		fmt.Fprintf(out, "maintenance: %s\n", d.MaintenanceID)
	}
	if d.Tracked {
		fmt.Fprintf(out, "deadline: %s (in %s)\n", fmtMs(d.DeadlineMs), time.Until(time.UnixMilli(d.DeadlineMs)).Round(time.Millisecond))
		fmt.Fprintf(out, "timeout:  %s\n", time.Duration(d.TimeoutMs)*time.Millisecond)
		if d.Class != "" {
			fmt.Fprintf(out, "class:    %s\n", d.Class)
		}
	}
	if d.DownSinceMs > 0 && d.State == inspect.StateUnreachable {
		fmt.Fprintf(out, "unreachable since: %s\n", fmtMs(d.DownSinceMs))
	} else if d.DownSinceMs > 0 {
		fmt.Fprintf(out, "timed out since: %s\n", fmtMs(d.DownSinceMs))
	}
	return nil
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// devicesDownOptions are the flags of `flatline devices down`.
type devicesDownOptions struct {
	class  string
	parent string
	limit  int
	output outputOptions
}

// Validate checks the flags, naming the one that is wrong.
func (o *devicesDownOptions) Validate() error {
	if o.limit < 0 {
		return fmt.Errorf("--limit: must not be negative, got %d", o.limit)
	}
	return o.output.Validate()
}

func newDevicesCmd(r *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "devices",
		Short:   "Inspect the fleet",
		Example: `  flatline devices down --class camera`,
	}
	var o devicesDownOptions
	down := &cobra.Command{
		Use:   "down",
		Short: "List the devices timed out or unreachable now (within dispatch.recovery_window): class, parent, state, deadline, down for",
		Example: `  flatline devices down
  flatline devices down --class camera --limit 20
  flatline devices down --parent gw-7
  flatline devices down -o json | jq '.devices[].device_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), r, cmd.OutOrStdout(), time.Now())
		},
	}
	down.Flags().StringVar(&o.class, "class", "", "only devices of this class")
	down.Flags().StringVar(&o.parent, "parent", "", "only the children of this device (their gateway)")
	down.Flags().IntVar(&o.limit, "limit", 1000, "list at most this many (0 = all)")
	o.output.register(down, false)
	cmd.AddCommand(down)
	return cmd
}

func (o *devicesDownOptions) run(ctx context.Context, r *rootOptions, out io.Writer, now time.Time) error {
	cfg, store, policy, closeStore, err := r.readDevices(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	list, err := o.list(ctx, store, policy, cfg, now)
	if err != nil {
		return err
	}
	if o.output.JSON() {
		return writeJSON(out, list)
	}
	if len(list.Devices) == 0 {
		fmt.Fprintln(out, "no device is down")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tCLASS\tPARENT\tSTATE\tDEADLINE\tDOWN FOR")
	for _, d := range list.Devices {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.DeviceID, dash(d.Class), dash(d.Parent), d.State, fmtMs(d.DeadlineMs),
			(time.Duration(d.DownForMs) * time.Millisecond).Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if list.Truncated {
		fmt.Fprintf(out, "(the first %d found; --limit 0 lists all)\n", len(list.Devices))
	}
	return nil
}

// list follows the listing's cursor, a page of at most
// httpapi.DevicesDownMaxLimit at a time as GET /devices/down does, until
// it has --limit devices (all with 0), and sorts them longest down first.
// Next is where the listing would go on, for a truncated list.
func (o *devicesDownOptions) list(ctx context.Context, store *shard.Store, policy *timeouts.Policy, cfg *configs.Config, now time.Time) (inspect.DownList, error) {
	all := inspect.DownList{Devices: []inspect.DownDevice{}}
	for {
		page := httpapi.DevicesDownMaxLimit
		if o.limit > 0 {
			page = min(page, o.limit-len(all.Devices))
		}
		got, err := inspect.ListDown(ctx, store, policy, inspect.DownQuery{
			Class: o.class, Parent: o.parent, Limit: page, Cursor: all.Next,
			Window: cfg.Dispatch.RecoveryWindow, Pad: cfg.Ingest.CoalesceWindow,
		}, now)
		if err != nil {
			return inspect.DownList{}, err
		}
		all.Devices = append(all.Devices, got.Devices...)
		all.Next, all.Truncated = got.Next, got.Truncated
		if got.Next == "" || o.limit > 0 && len(all.Devices) >= o.limit {
			break
		}
	}
	slices.SortStableFunc(all.Devices, func(a, b inspect.DownDevice) int { return cmp.Compare(a.DeadlineMs, b.DeadlineMs) })
	return all, nil
}

// dash is s, or "-" when it is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
