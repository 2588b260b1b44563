package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/spf13/cobra"
)

func newSchemaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Register and list the JSON Schemas of a datastore's columns (schema-on-write)",
		Long: `A column may have a JSON Schema (draft 2020-12). Once a version is registered, every write of a cell
of the column is checked against the column's latest version when it is applied, and refused with
400 schema_violation naming the cell, the JSON pointer of the failing field and the version. Cells
written before are never checked again; 'schema put --dry-run' counts how many of the column's
latest cells a schema would reject, without registering it.

Versions are numbered 1, 2, ... per column; registering the latest version's schema again changes
nothing (and completes a registration that failed part-way).

  put    register a schema as the column's next version, or --dry-run it
  list   list the columns with a schema, or the versions of one column`,
	}
	cmd.AddCommand(newSchemaPutCmd(), newSchemaListCmd())
	return cmd
}

// schemaPutFlags are the flags of `schema put`.
type schemaPutFlags struct {
	dryRun bool
	quiet  bool
}

func newSchemaPutCmd() *cobra.Command {
	var cf clientFlags
	var f schemaPutFlags
	cmd := &cobra.Command{
		Use:   "put COLUMN FILE",
		Short: "Register the JSON Schema in FILE ('-': stdin) as COLUMN's next version, or --dry-run it",
		Long: `Register the JSON Schema (draft 2020-12) in FILE ('-' reads stdin) as the next version of COLUMN's
schema, on every partition of the datastore. From then on every write of the column is checked
against it. A schema that does not compile is refused with the reason.

--dry-run registers nothing: it reads the latest cell of COLUMN of every row, partition by
partition (a scan of the datastore, with a progress line on a terminal), and reports how many
the schema would reject, with a few examples.`,
		Example: `  schemaless schema put BASE examples/schemas/trips_base.json --dry-run
  schemaless schema put BASE examples/schemas/trips_base.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			text, err := readFileArg(args[1])
			if err != nil {
				return err
			}
			return runSchemaPut(ctx, cl, args[0], text, f, os.Stdout, os.Stderr)
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "register nothing: count the column's latest cells the schema would reject")
	cmd.Flags().BoolVar(&f.quiet, "quiet", false, "no progress line")
	return cmd
}

// readFileArg reads the file path names, or stdin for "-".
func readFileArg(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// runSchemaPut registers text as column's next schema version, or with f.dryRun reports what
// it would reject, one partition at a time with a progress line on progress (a terminal).
func runSchemaPut(ctx context.Context, cl *client.Client, column string, text []byte, f schemaPutFlags, out, progress io.Writer) error {
	if !f.dryRun {
		res, err := cl.PutSchema(ctx, column, text, false)
		if err != nil {
			return err
		}
		what := "registered"
		if res.Status == wire.SchemaExists {
			what = "unchanged: the latest version holds this schema"
		}
		fmt.Fprintf(out, "column %s: schema version %d %s\n", res.Column, res.Version, what)
		return nil
	}
	term := !f.quiet && isTerminal(progress)
	start := time.Now()
	total, err := cl.DryRunSchemaByPartition(ctx, column, text, func(done, all int, sum wire.SchemaDryRunCheck) {
		if term {
			fmt.Fprintf(progress, "\r\033[K%s", dryRunLine(done, all, &sum, time.Since(start)))
		}
	})
	if term {
		fmt.Fprintln(progress)
	}
	if err != nil {
		return err
	}
	d := total.DryRun
	fmt.Fprintf(out, "column %s: schema version %d (dry run, nothing registered) would reject %d of %d latest cells (%d partitions)\n",
		total.Column, total.Version, d.Rejected, d.Rows, len(d.Partitions))
	for i, e := range d.Examples {
		if i == 10 {
			fmt.Fprintf(out, "  ... %d more\n", d.Rejected-10)
			break
		}
		at := e.Pointer
		if at == "" {
			at = "(body)"
		}
		fmt.Fprintf(out, "  %s/%s/%d  %s: %s\n", e.RowKey, total.Column, e.RefKey, at, e.Message)
	}
	return nil
}

// dryRunLine renders a dry run's progress: partitions done of all, cells checked and rejected.
func dryRunLine(done, all int, d *wire.SchemaDryRunCheck, took time.Duration) string {
	const width = 24
	n := width * done / max(all, 1)
	return fmt.Sprintf("dry run [%s%s] %d/%d partitions  %d latest cells checked, %d rejected  %.1fs",
		strings.Repeat("#", n), strings.Repeat(".", width-n), done, all, d.Rows, d.Rejected, took.Seconds())
}

func newSchemaListCmd() *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [COLUMN]",
		Short: "List the columns with a schema and their latest version, or every version of COLUMN",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			column := ""
			if len(args) == 1 {
				column = args[0]
			}
			return runSchemaList(cmd.Context(), cl, column, asJSON, os.Stdout)
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON answer")
	return cmd
}

// runSchemaList prints the schemas of column (every version) or of every column (the latest).
func runSchemaList(ctx context.Context, cl *client.Client, column string, asJSON bool, out io.Writer) error {
	vs, err := cl.Schemas(ctx, column)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(out, vs)
	}
	if len(vs.Versions) == 0 {
		if column == "" {
			fmt.Fprintln(out, "no column has a schema")
		} else {
			fmt.Fprintf(out, "column %s has no schema\n", column)
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COLUMN\tVERSION\tCREATED_AT\tSCHEMA")
	for _, v := range vs.Versions {
		s := string(v.Schema)
		if len(s) > 80 {
			s = s[:77] + "..."
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", v.Column, v.Version, v.CreatedAt.Format(time.RFC3339), s)
	}
	return tw.Flush()
}
