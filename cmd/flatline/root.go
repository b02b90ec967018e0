package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/logging"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// version is set at build time with -ldflags "-X main.version=..."; the
// linker can only set a package-level variable.
var version = "dev"

// rootOptions are the persistent flags and what the process was started
// with. execute builds one per run and hands it to every command's builder,
// so commands share nothing through package state.
type rootOptions struct {
	configFile string
	logLevel   string
	env        []string // the process environment, for FLATLINE_* variables
	stderr     io.Writer
}

// load reads the configuration: defaults < file < FLATLINE_* env < flags.
func (r *rootOptions) load(set map[string]string) (*configs.Config, error) {
	if set == nil {
		set = map[string]string{}
	}
	if r.logLevel != "" {
		set["log.level"] = r.logLevel
	}
	return configs.Load(configs.LoadOptions{File: r.configFile, Env: r.env, Set: set})
}

// connect loads the configuration and opens the Redis store for a command
// that writes; close it with the returned func.
func (r *rootOptions) connect(ctx context.Context) (*configs.Config, *shard.Store, func(), error) {
	return r.open(ctx, app.Connect)
}

// connectReader is connect for a read command, which must not change Redis
// (the README's "Commands"): it loads no scripts, and the command calls none.
func (r *rootOptions) connectReader(ctx context.Context) (*configs.Config, *shard.Store, func(), error) {
	return r.open(ctx, app.ConnectReader)
}

// show is the body of a command that reads Redis and shows what it read:
// read returns it as /status or -o json shows it, and how to print it for
// people.
func (r *rootOptions) show(cmd *cobra.Command, output outputOptions, read func(*shard.Store) (any, func(io.Writer), error)) error {
	if err := output.Validate(); err != nil {
		return err
	}
	_, store, closeStore, err := r.connectReader(cmd.Context())
	if err != nil {
		return err
	}
	defer closeStore()
	v, print, err := read(store)
	if err != nil {
		return err
	}
	if output.JSON() {
		return writeJSON(cmd.OutOrStdout(), v)
	}
	print(cmd.OutOrStdout())
	return nil
}

// readDevices is connectReader for the commands that read devices: they
// also need the timeout policy (class names and timeouts), read from the
// class registry without registering anything.
func (r *rootOptions) readDevices(ctx context.Context) (*configs.Config, *shard.Store, *timeouts.Policy, func(), error) {
	cfg, store, closeStore, err := r.connectReader(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	policy, err := app.ReadPolicy(ctx, store, cfg.Timeouts)
	if err != nil {
		closeStore()
		return nil, nil, nil, nil, err
	}
	return cfg, store, policy, closeStore, nil
}

func (r *rootOptions) open(ctx context.Context, connect connectFunc) (*configs.Config, *shard.Store, func(), error) {
	cfg, rdb, store, err := r.dial(ctx, connect)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, store, func() { _ = rdb.Close() }, nil
}

// connectFunc opens the Redis client and the store on it: app.Connect or
// app.ConnectReader.
type connectFunc func(context.Context, redisconn.Config) (redisconn.Client, *shard.Store, error)

// dial is open for a command that also describes the Redis deployment
// (redisconn.ReadStatus asks the client itself, not the store); the
// command closes the client.
func (r *rootOptions) dial(ctx context.Context, connect connectFunc) (*configs.Config, redisconn.Client, *shard.Store, error) {
	cfg, err := r.load(nil)
	if err != nil {
		return nil, nil, nil, err
	}
	rdb, store, err := connect(ctx, cfg.Redis)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, rdb, store, nil
}

func (r *rootOptions) logger(cfg *configs.Config) *slog.Logger {
	return logging.New(cfg.Log, r.stderr)
}

// execute runs one command line and returns the exit code. An error reaches
// the terminal as one line: cobra prints neither it nor the usage.
func execute(args, env []string, stdout, stderr io.Writer) int {
	root := newRootCmd(&rootOptions{env: env, stderr: stderr})
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "flatline: %v\n", err)
		var u usageError
		if errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command ") {
			return exitUsage
		}
		return 1
	}
	return 0
}

// exitUsage is the exit code of a command line flatline cannot run: an
// unknown command or flag, a bad flag value, arguments the command does not
// take. Scripts tell it from a failure of the work itself (1), as with
// other Unix tools (2, like grep and getopt).
const exitUsage = 2

// usageError is a command line flatline cannot run.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// markUsage makes the flag and argument errors of cmd and its subcommands
// usage errors.
func markUsage(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markUsage(sub)
	}
}

func newRootCmd(r *rootOptions) *cobra.Command {
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
	// cobra adds each command's --help only once it has found the command,
	// so while it looks for the command it takes an unknown --help for a
	// flag with a value: "--help --config f.yaml" became --help=--config and
	// the command "f.yaml". Declared here, persistent, every command
	// (cobra's help and completion included) knows it takes no value.
	root.PersistentFlags().BoolP("help", "h", false, "help for the command")
	root.PersistentFlags().StringVar(&r.configFile, "config", "", "configuration file (YAML); FLATLINE_* environment variables override it")
	root.PersistentFlags().StringVar(&r.logLevel, "log-level", "", "log level: debug, info, warn, error (overrides log.level)")
	root.AddCommand(
		newServeCmd(r),
		newDevCmd(r),
		newSimulateCmd(r),
		newTailCmd(r),
		newShardsCmd(r),
		newStormCmd(r),
		newMaintenanceCmd(r),
		newDeviceCmd(r),
		newDevicesCmd(r),
		newConfigCmd(r),
		newVersionCmd(),
	)
	markUsage(root)
	return root
}

// versionInfo is `flatline version -o json`.
type versionInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
}

func newVersionCmd() *cobra.Command {
	var o outputOptions
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Args:    cobra.NoArgs,
		Example: "  flatline version\n  flatline version -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if o.JSON() {
				return writeJSON(cmd.OutOrStdout(), versionInfo{Version: version, GoVersion: runtime.Version()})
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "flatline %s\n", version)
			return err
		},
	}
	o.register(cmd, false)
	return cmd
}
