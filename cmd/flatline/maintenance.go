package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/maintenance"
	"github.com/flatline-dev/flatline/shard"
)

func newMaintenanceCmd(r *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "maintenance",
		Short: "Mark planned silence: matching devices that go quiet fire nothing until the window ends",
		Example: `  flatline maintenance start --prefix rack-7/ --for 2h --reason "firmware 4.2"
  flatline maintenance start --device d-1,d-2 --device d-3 --until 2026-12-01T06:00:00Z
  flatline maintenance list -o json
  flatline maintenance end m-20261129T054400Z-3fa9c2`,
	}
	cmd.AddCommand(newMaintenanceStartCmd(r), newMaintenanceListCmd(r), newMaintenanceEndCmd(r))
	return cmd
}

// maintenanceStartOptions are the flags of `flatline maintenance start`.
type maintenanceStartOptions struct {
	devices []string
	class   string
	prefix  string
	forD    time.Duration
	until   string
	reason  string
	output  outputOptions
}

func newMaintenanceStartCmd(r *rootOptions) *cobra.Command {
	var o maintenanceStartOptions
	cmd := &cobra.Command{
		Use:   "start (--device ID… | --class C | --prefix P) (--for D | --until RFC3339)",
		Short: "Open a maintenance window and print its id",
		Long: `start opens a maintenance window: a matching device whose deadline passes
while it is open fires nothing. When the window ends (its time, or
` + "`maintenance end`" + `), a device that beat again since fires nothing; one that did
not fires a timeout carrying "maintenance_id" after its own timeout from the end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.Validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), r, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.devices, "device", nil, "device ids (repeatable, comma-separated; at most 1,000)")
	f.StringVar(&o.class, "class", "", "every device of this class")
	f.StringVar(&o.prefix, "prefix", "", "every device whose id starts with this")
	f.DurationVar(&o.forD, "for", 0, "how long the window lasts (a Go duration: 2h, 168h)")
	f.StringVar(&o.until, "until", "", "when the window ends (RFC 3339)")
	f.StringVar(&o.reason, "reason", "", "why, for the operators who see it")
	o.output.register(cmd, false) // json: the window as /status lists it
	return cmd
}

// request turns the flags into a maintenance.Request.
func (o *maintenanceStartOptions) request() (maintenance.Request, error) {
	req := maintenance.Request{Class: o.class, Prefix: o.prefix, For: o.forD, Reason: o.reason}
	for _, id := range o.devices {
		req.Devices = append(req.Devices, strings.TrimSpace(id))
	}
	if o.until != "" {
		t, err := time.Parse(time.RFC3339, o.until)
		if err != nil {
			return req, fmt.Errorf("--until: not RFC 3339: %q", o.until)
		}
		req.Until = t
	}
	if o.forD < 0 {
		return req, fmt.Errorf("--for: must be positive, got %s", o.forD)
	}
	return req, nil
}

func (o *maintenanceStartOptions) run(ctx context.Context, r *rootOptions, out io.Writer) error {
	req, err := o.request()
	if err != nil {
		return err
	}
	cfg, store, closeStore, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	w, err := maintenance.Start(ctx, store, cfg.Maintenance, req, time.Now())
	if err != nil {
		return err
	}
	if !o.output.JSON() {
		fmt.Fprintln(out, w.ID)
		return nil
	}
	return writeJSON(out, inspect.WindowStatus{ID: w.ID, Match: w.Match, FromMs: w.FromMs, UntilMs: w.UntilMs, Reason: w.Reason})
}

// maintenanceListOptions are the flags of `flatline maintenance list`.
type maintenanceListOptions struct {
	all    bool
	output outputOptions
}

func newMaintenanceListCmd(r *rootOptions) *cobra.Command {
	var o maintenanceListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the open maintenance windows and how many devices each holds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return r.show(cmd, o.output, func(store *shard.Store) (any, func(io.Writer), error) {
				ws, err := inspect.Maintenance(cmd.Context(), store, o.all, time.Now())
				return ws, func(out io.Writer) { printWindows(out, ws) }, err
			})
		},
	}
	cmd.Flags().BoolVar(&o.all, "all", false, "add the ended windows still kept, with ended_at_ms")
	o.output.register(cmd, false)
	return cmd
}

func printWindows(out io.Writer, ws []inspect.WindowStatus) {
	if len(ws) == 0 {
		fmt.Fprintln(out, "no maintenance windows")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMATCH\tFROM\tUNTIL\tENDED\tHELD\tREASON")
	for _, w := range ws {
		ended := "-"
		if w.EndedAtMs > 0 {
			ended = fmtMs(w.EndedAtMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", w.ID, describeMatch(w.Match), fmtMs(w.FromMs), fmtMs(w.UntilMs), ended, w.Held, w.Reason)
	}
	_ = tw.Flush()
}

func describeMatch(m shard.WindowMatch) string {
	switch {
	case m.Class != "":
		return "class " + m.Class
	case m.Prefix != "":
		return "prefix " + m.Prefix
	case len(m.Devices) <= 3:
		return "devices " + strings.Join(m.Devices, ",")
	default:
		return fmt.Sprintf("devices %s,… (%d)", strings.Join(m.Devices[:3], ","), len(m.Devices))
	}
}

func newMaintenanceEndCmd(r *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "end ID",
		Short: "End a maintenance window now: the devices it held get their own timeout from now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, store, closeStore, err := r.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			w, n, err := maintenance.End(cmd.Context(), store, args[0], time.Now(), retry.Sleep)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ended %s at %s: %d held devices get their own timeout from now\n", w.ID, fmtMs(w.EndedAtMs), n)
			return nil
		},
	}
}
