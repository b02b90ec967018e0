package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/internal/simulate"
)

func newSimulateCmd(g *globals) *cobra.Command {
	var sc simulate.Config
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Generate heartbeat load into the signals topic",
		Example: `  flatline simulate --devices 10000 --interval 1s --silent 0.01
  flatline simulate --devices 200000 --interval 1s --silent 0 --rate 50000 --duration 1m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sc.Devices < 1 {
				return fmt.Errorf("--devices: must be at least 1, got %d", sc.Devices)
			}
			if sc.Interval <= 0 {
				return fmt.Errorf("--interval: must be positive, got %s", sc.Interval)
			}
			if sc.Silent < 0 || sc.Silent > 1 {
				return fmt.Errorf("--silent: must be a fraction within [0, 1], got %g", sc.Silent)
			}
			if sc.Rate < 0 {
				return fmt.Errorf("--rate: must not be negative, got %g", sc.Rate)
			}
			cfg, err := g.load(nil)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			st, err := simulate.Run(cmd.Context(), cfg.Kafka, sc, func(s simulate.Stats) {
				fmt.Fprintf(out, "sent %d heartbeats, %d errors, %d devices silent\n", s.Sent, s.Errors, len(s.Silenced))
			})
			fmt.Fprintf(out, "done: sent %d heartbeats, %d errors, %d devices went silent\n", st.Sent, st.Errors, len(st.Silenced))
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&sc.Devices, "devices", 1000, "number of simulated devices")
	f.DurationVar(&sc.Interval, "interval", time.Second, "heartbeat interval of each device")
	f.Float64Var(&sc.Silent, "silent", 0.01, "fraction of devices that go silent")
	f.DurationVar(&sc.SilentAfter, "silent-within", 10*time.Second, "silent devices stop at random moments within this window")
	f.Float64Var(&sc.Rate, "rate", 0, "cap on heartbeats per second (0 = devices/interval)")
	f.DurationVar(&sc.Duration, "duration", 0, "how long to run (0 = until interrupted)")
	f.StringVar(&sc.Prefix, "prefix", "dev-", "device id prefix")
	f.StringVar(&sc.Class, "class", "", "class field of every heartbeat")
	return cmd
}
