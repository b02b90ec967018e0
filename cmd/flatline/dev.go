package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/app/demo"
)

func newDevCmd(r *rootOptions) *cobra.Command {
	var o demo.DevOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Zero-setup demo: embedded Kafka and Redis, flatline, and a simulated fleet",
		Long: `dev starts an embedded Kafka, a Redis (redis-server from PATH on a free port, else an
in-process one), a flatline instance and a simulated fleet in which some devices go silent,
and prints a live line per second: devices tracked, resets/s, timeouts/s, lateness p99.`,
		Example: `  flatline dev
  flatline dev --devices 20000 --timeout 2s
  flatline dev --shape emqx5`,
		Args: cobra.NoArgs,
		// RunDev validates o (DevOptions.Validate) before it starts anything.
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Version = version
			return demo.RunDev(cmd.Context(), o, cmd.OutOrStdout(), r.stderr, r.logLevel)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Devices, "devices", 5000, "simulated devices")
	f.DurationVar(&o.Interval, "interval", time.Second, "heartbeat interval")
	f.DurationVar(&o.Timeout, "timeout", 3*time.Second, "device timeout")
	f.Float64Var(&o.Silent, "silent", 0.05, "fraction of devices that go silent")
	f.DurationVar(&o.Duration, "duration", 0, "stop after this long (0 = until interrupted)")
	f.StringVar(&o.HTTPAddr, "http", "127.0.0.1:9464", "admin HTTP address")
	f.StringVar((*string)(&o.Shape), "shape", "native", "how the fleet writes heartbeats: native, emqx5, emqx4, mqtt-topic, azure or avro")
	return cmd
}
