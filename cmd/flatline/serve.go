package main

import (
	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/internal/app"
)

func newServeCmd(g *globals) *cobra.Command {
	var roles string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the service: ingest, scanners, dispatch and the HTTP endpoints",
		Example: `  flatline serve --config /etc/flatline/flatline.yaml
  FLATLINE_REDIS_ADDRS=redis:6379 FLATLINE_KAFKA_BROKERS=kafka:9092 flatline serve
  flatline serve --roles ingest      # scale ingest and scanning separately`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := map[string]string{}
			if roles != "" {
				set["roles"] = roles
			}
			cfg, err := g.load(set)
			if err != nil {
				return err
			}
			log := g.logger(cfg)
			for _, w := range cfg.Warnings {
				log.Warn(w)
			}
			a, err := app.New(cmd.Context(), *cfg, log, app.Hooks{})
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&roles, "roles", "", "comma-separated parts to run: ingest, scanner (default both; config key roles)")
	return cmd
}
