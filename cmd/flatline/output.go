package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Output formats of the read commands' -o/--output flag.
const (
	outputText = "text"
	outputJSON = "json"
)

// outputOptions are the -o/--output flag every read command takes (the README's "Commands"),
// and the --json flag that scripts written before it still pass.
type outputOptions struct {
	format string
	json   bool
	cmd    *cobra.Command // to tell an explicit --output from the default
}

// register adds -o/--output to cmd, and --json when withJSONAlias: only the
// commands that had --json keep it, so no new spelling is added.
func (o *outputOptions) register(cmd *cobra.Command, withJSONAlias bool) {
	f := cmd.Flags()
	f.StringVarP(&o.format, "output", "o", outputText, "output format: text or json")
	if withJSONAlias {
		f.BoolVar(&o.json, "json", false, "same as --output json")
	}
	o.cmd = cmd
}

// Validate refuses an unknown format, and --json beside an explicit
// --output of another format, rather than guess which one was meant.
func (o *outputOptions) Validate() error {
	switch o.format {
	case outputText, outputJSON:
	default:
		return fmt.Errorf("--output: unknown format %q (text or json)", o.format)
	}
	if o.json && o.cmd.Flags().Changed("output") && o.format != outputJSON {
		return fmt.Errorf("--json contradicts --output %s", o.format)
	}
	return nil
}

// JSON reports whether the command prints JSON.
func (o *outputOptions) JSON() bool { return o.json || o.format == outputJSON }

// writeJSON prints v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
