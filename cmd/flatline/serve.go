package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/internal/heapfloor"
)

// serveOptions are the flags of `flatline serve`. They override
// configuration keys, so the configuration validates them (naming the key).
type serveOptions struct {
	roles string
}

func newServeCmd(r *rootOptions) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the service: ingest, scanners, dispatch and the HTTP endpoints",
		Example: `  flatline serve --config /etc/flatline/flatline.yaml
  FLATLINE_REDIS_ADDRS=redis:6379 FLATLINE_KAFKA_BROKERS=kafka:9092 flatline serve
  flatline serve --roles ingest      # scale ingest and scanning separately`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), r)
		},
	}
	cmd.Flags().StringVar(&o.roles, "roles", "", "comma-separated parts to run: ingest, scanner (default both; config key roles)")
	return cmd
}

func (o *serveOptions) run(ctx context.Context, r *rootOptions) error {
	set := map[string]string{}
	if o.roles != "" {
		set["roles"] = o.roles
	}
	cfg, err := r.load(set)
	if err != nil {
		return err
	}
	log := r.logger(cfg)
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	// The collector runs when the heap reaches 64 MiB, or twice what is
	// live once that is more, unless GOGC is set (docs/operations.md,
	// "Memory").
	if f := heapfloor.Start(heapfloor.Default); f != nil {
		defer f.Stop()
	}
	a, err := app.New(ctx, *cfg, log, app.Hooks{})
	if err != nil {
		return err
	}
	a.Metrics.SetVersion(version)
	return a.Run(ctx)
}
