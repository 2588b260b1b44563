package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "schemaless",
		Short:         "A datastore of immutable JSON cells in sharded SQL, replicated by raft",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newDevCmd(), newPutCmd(), newTransactCmd(), newRowKeysCmd(), newGetCmd(), newLatestCmd(), newVersionsCmd(), newEraseCmd(), newImportCmd(), newStatusCmd(), newTriggersCmd(), newIndexCmd(), newSchemaCmd(), newBenchCmd(), newJepsenCmd(), newAdminCmd(), newCertsCmd())
	registerClientAuthFlags(root)
	return root
}

// logFlags are the logging flags shared by the commands that run nodes.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&l.format, "log-format", "text", "log format: text or json")
	cmd.Flags().StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(l.level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", l.level, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}
