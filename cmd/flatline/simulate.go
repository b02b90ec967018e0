package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/app/demo"
	"github.com/flatline-dev/flatline/internal/simulate"
)

// simulateOptions are the flags of `flatline simulate`.
type simulateOptions struct {
	simulate.Config
}

// Validate checks the flags a user gets wrong, naming the flag;
// simulate.Run checks the whole Config again, naming its fields.
func (o *simulateOptions) Validate() error {
	switch {
	case o.Devices < 1:
		return fmt.Errorf("--devices: must be at least 1, got %d", o.Devices)
	case o.Interval <= 0:
		return fmt.Errorf("--interval: must be positive, got %s", o.Interval)
	case o.Silent < 0 || o.Silent > 1:
		return fmt.Errorf("--silent: must be a fraction within [0, 1], got %g", o.Silent)
	case o.Rate < 0:
		return fmt.Errorf("--rate: must not be negative, got %g", o.Rate)
	case !o.Shape.Valid():
		return fmt.Errorf("--shape: want one of %v, got %q", simulate.Shapes, o.Shape)
	}
	return nil
}

func newSimulateCmd(r *rootOptions) *cobra.Command {
	var o simulateOptions
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Generate heartbeat load into the signals topic",
		Example: `  flatline simulate --devices 10000 --interval 1s --silent 0.01
  flatline simulate --devices 200000 --interval 1s --silent 0 --rate 50000 --duration 1m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), r, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Devices, "devices", 1000, "number of simulated devices")
	f.DurationVar(&o.Interval, "interval", time.Second, "heartbeat interval of each device")
	f.Float64Var(&o.Silent, "silent", 0.01, "fraction of devices that go silent")
	f.DurationVar(&o.SilentAfter, "silent-within", 10*time.Second, "silent devices stop at random moments within this window")
	f.Float64Var(&o.Rate, "rate", 0, "cap on heartbeats per second (0 = devices/interval)")
	f.DurationVar(&o.Duration, "duration", 0, "how long to run (0 = until interrupted)")
	f.StringVar(&o.Prefix, "prefix", "dev-", "device id prefix")
	f.StringVar(&o.Class, "class", "", "class field of every heartbeat")
	f.StringVar((*string)(&o.Shape), "shape", "native", "how heartbeats are written: native, emqx5, emqx4, mqtt-topic, azure or avro (README \"Real sources\")")
	return cmd
}

func (o *simulateOptions) run(ctx context.Context, r *rootOptions, out io.Writer) error {
	cfg, err := r.load(nil)
	if err != nil {
		return err
	}
	if o.Shape == simulate.ShapeAvro {
		enc, closeReg, err := demo.AvroEncoder(ctx, cfg.Ingest.SchemaRegistry, cfg.Kafka.SignalsTopic)
		if err != nil {
			return err
		}
		defer closeReg()
		o.Avro = enc
	}
	st, err := simulate.Run(ctx, cfg.Kafka, o.Config, func(s simulate.Stats) {
		fmt.Fprintf(out, "sent %d heartbeats, %d errors, %d devices silent\n", s.Sent, s.Errors, len(s.Silenced))
	})
	fmt.Fprintf(out, "done: sent %d heartbeats, %d errors, %d devices went silent\n", st.Sent, st.Errors, len(st.Silenced))
	if ctx.Err() != nil {
		return nil // interrupted: the summary above is the result
	}
	return err
}
