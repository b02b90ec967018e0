package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/dispatch"
)

// tailOptions are the flags of `flatline tail`.
type tailOptions struct {
	fromBeginning bool
}

func newTailCmd(r *rootOptions) *cobra.Command {
	var o tailOptions
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print events from the timeouts topic, one JSON object per line",
		Example: `  flatline tail
  flatline tail --from-beginning | jq 'select(.type=="timeout")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), r, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&o.fromBeginning, "from-beginning", false, "start at the oldest event instead of the newest")
	return cmd
}

func (o *tailOptions) run(ctx context.Context, r *rootOptions, out io.Writer) error {
	cfg, err := r.load(nil)
	if err != nil {
		return err
	}
	err = dispatch.Tail(ctx, cfg.Kafka, o.fromBeginning, out)
	if ctx.Err() != nil {
		return nil // interrupted: the way a tail ends
	}
	return err
}
