package main

import (
	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/dispatch"
)

func newTailCmd(g *globals) *cobra.Command {
	var fromBeginning bool
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print events from the timeouts topic, one JSON object per line",
		Example: `  flatline tail
  flatline tail --from-beginning | jq 'select(.type=="timeout")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load(nil)
			if err != nil {
				return err
			}
			err = dispatch.Tail(cmd.Context(), cfg.Kafka, fromBeginning, cmd.OutOrStdout())
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&fromBeginning, "from-beginning", false, "start at the oldest event instead of the newest")
	return cmd
}
