package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/configs"
)

func newConfigCmd(r *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show or check the configuration",
		Example: `  flatline config print
  flatline config validate /etc/flatline/flatline.yaml`,
	}
	var printOut outputOptions
	printCmd := &cobra.Command{
		Use:   "print",
		Short: "Print the effective configuration (defaults, file, environment), secrets redacted",
		Example: `  flatline config print
  flatline config print --config flatline.yaml
  FLATLINE_SCANNER_GRACE=50ms flatline config print
  flatline config print -o json | jq .redis`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := printOut.Validate(); err != nil {
				return err
			}
			cfg, err := r.load(nil)
			if err != nil {
				return err
			}
			redacted := cfg.Redacted
			if printOut.JSON() {
				redacted = cfg.RedactedJSON
			}
			out, err := redacted()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	printOut.register(printCmd, false)
	cmd.AddCommand(printCmd, &cobra.Command{
		Use:     "validate [FILE]",
		Short:   "Check a configuration file and the FLATLINE_* environment; exit non-zero naming the bad key or variable",
		Example: `  flatline config validate flatline.yaml`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := r.configFile
			if len(args) == 1 {
				file = args[0]
			}
			// Strict, unlike serve: a variable that names no key fails here,
			// before a deploy, rather than being a warning in the logs after.
			if _, err := configs.Load(configs.LoadOptions{File: file, Env: r.env, StrictEnv: true}); err != nil {
				return err
			}
			name := file
			if name == "" {
				name = "defaults and environment"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", name)
			return nil
		},
	})
	return cmd
}
