package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/logging"
	"github.com/flatline-dev/flatline/shard"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// globals are the options every command takes.
type globals struct {
	configFile string
	logLevel   string
	stdout     io.Writer
	stderr     io.Writer
}

// load reads the configuration: defaults < file < FLATLINE_* env < flags.
func (g *globals) load(set map[string]string) (*configs.Config, error) {
	if set == nil {
		set = map[string]string{}
	}
	if g.logLevel != "" {
		set["log.level"] = g.logLevel
	}
	return configs.Load(configs.LoadOptions{File: g.configFile, Env: os.Environ(), Set: set})
}

// connect loads the configuration and opens the Redis store; close it with
// the returned func.
func (g *globals) connect(ctx context.Context) (*configs.Config, *shard.Store, func(), error) {
	cfg, err := g.load(nil)
	if err != nil {
		return nil, nil, nil, err
	}
	rdb, store, err := app.Connect(ctx, cfg.Redis)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, store, func() { _ = rdb.Close() }, nil
}

func (g *globals) logger(cfg *configs.Config) *slog.Logger {
	return logging.New(cfg.Log, g.stderr)
}

func execute(args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		if !errors.Is(err, errSilent) {
			fmt.Fprintf(stderr, "flatline: %v\n", err)
		}
		return 1
	}
	return 0
}

// errSilent marks an error already reported to the user.
var errSilent = errors.New("reported")

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "flatline",
		Short: "flatline tells you, within a fraction of a second, that a device went silent",
		Long: `flatline consumes device heartbeats from Kafka, keeps one deadline per device in
sharded Redis sorted sets, and publishes a timeout event to Kafka when a deadline
passes with no newer heartbeat.

Start with 'flatline dev' for a zero-setup demo.`,
		Example: `  flatline dev                                   # zero-setup demo
  flatline serve --config flatline.yaml          # the service
  flatline shards status                         # layout, shards, watermark, owners
  flatline tail                                  # watch timeout events`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.configFile, "config", "", "configuration file (YAML); FLATLINE_* environment variables override it")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "", "log level: debug, info, warn, error (overrides log.level)")
	root.AddCommand(
		newServeCmd(g),
		newDevCmd(g),
		newSimulateCmd(g),
		newTailCmd(g),
		newShardsCmd(g),
		newDeviceCmd(g),
		newConfigCmd(g),
		newVersionCmd(g),
	)
	return root
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Args:    cobra.NoArgs,
		Example: "  flatline version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "flatline %s\n", version)
		},
	}
}
