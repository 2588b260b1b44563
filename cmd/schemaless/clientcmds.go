package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/spf13/cobra"
)

// clientFlags select the cluster and datastore of the client commands.
type clientFlags struct {
	endpoints   []string
	datastore   string
	consistency string
	timeout     time.Duration
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&f.endpoints, "endpoints", []string{"http://127.0.0.1:7070", "http://127.0.0.1:7071", "http://127.0.0.1:7072"}, "nodes' HTTP base URLs (comma-separated); any node serves any request")
	cmd.Flags().StringVar(&f.datastore, "datastore", "trips", "datastore name")
	cmd.Flags().StringVar(&f.consistency, "consistency", client.ConsistencyStrong, "read consistency: strong (linearizable) or stale (any replica)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 10*time.Second, "time limit of one request attempt")
}

func (f *clientFlags) client(ctx context.Context) (*client.Client, error) {
	cfg := client.DefaultConfig()
	cfg.Endpoints = f.endpoints
	cfg.Datastore = f.datastore
	cfg.Consistency = f.consistency
	cfg.RequestTimeout = f.timeout
	if err := applyClientAuth(ctx, &cfg); err != nil {
		return nil, err
	}
	return client.New(cfg)
}

func parseKeyArgs(args []string) (cells.Key, error) {
	rk, err := cells.ParseRowKey(args[0])
	if err != nil {
		return cells.Key{}, err
	}
	k := cells.Key{RowKey: rk, ColumnKey: args[1]}
	if len(args) > 2 {
		if k.RefKey, err = strconv.ParseInt(args[2], 10, 64); err != nil || k.RefKey < 0 {
			return cells.Key{}, &cells.FieldError{Field: "ref_key", Err: cells.ErrInvalidRefKey}
		}
	}
	return k, cells.ValidateColumnKey(k.ColumnKey)
}

// printJSON prints v to stdout as writeJSON does.
func printJSON(v any) error { return writeJSON(os.Stdout, v) }

// writeJSON writes v to w indented, as the API writes it (no HTML escaping).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func newPutCmd() *cobra.Command {
	var (
		f        clientFlags
		ifLatest string
		key      string
	)
	cmd := &cobra.Command{
		Use:   "put ROW_KEY COLUMN_KEY REF_KEY [BODY|-]",
		Short: "Write one cell (put_cell); BODY is a JSON object, '-' or absent reads it from stdin",
		Long: `Write one cell (put_cell); BODY is a JSON object, '-' or absent reads it from stdin.

With --if-latest N the cell is written only if the column's latest ref key is N when the write
is applied (--if-latest none: only if the column has no cell); otherwise nothing is written and
the command fails naming the column's latest ref key (exit status 1). --idempotency-key names
the write, so that running the same command again within 10 minutes answers the first run's
outcome.`,
		Args: cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseKeyArgs(args)
			if err != nil {
				return err
			}
			var body []byte
			if len(args) == 4 && args[3] != "-" {
				body = []byte(args[3])
			} else if body, err = io.ReadAll(os.Stdin); err != nil {
				return err
			}
			cl, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			var opts []client.WriteOption
			switch {
			case ifLatest == "none":
				opts = append(opts, client.IfNoCell())
			case ifLatest != "":
				n, err := strconv.ParseInt(ifLatest, 10, 64)
				if err != nil || n < 0 {
					return fmt.Errorf("--if-latest %q: want a ref key (a non-negative integer) or none", ifLatest)
				}
				opts = append(opts, client.IfLatestRefKey(n))
			}
			if key != "" {
				opts = append(opts, client.IdempotencyKey(key))
			}
			res, err := cl.PutCell(cmd.Context(), k.RowKey, k.ColumnKey, k.RefKey, json.RawMessage(body), opts...)
			var pe *client.PreconditionError
			if errors.As(err, &pe) {
				return fmt.Errorf("precondition failed: %s", pe.Conditions())
			}
			if err != nil && !errors.Is(err, client.ErrConflict) {
				return err
			}
			if perr := printJSON(res); perr != nil {
				return perr
			}
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&ifLatest, "if-latest", "", "write only if the column's latest ref key is this (or none: only if the column has no cell)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "name the write: a repeat within 10 minutes answers the first outcome")
	return cmd
}

func newGetCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "get ROW_KEY [COLUMN_KEY REF_KEY]",
		Short: "Read one cell (get_cell), or with only ROW_KEY the latest cell of every column",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 && len(args) != 3 {
				return errors.New("want ROW_KEY, or ROW_KEY COLUMN_KEY REF_KEY")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 1 {
				rk, err := cells.ParseRowKey(args[0])
				if err != nil {
					return err
				}
				cs, err := cl.GetRow(cmd.Context(), rk)
				if err != nil {
					return err
				}
				return printJSON(map[string]any{"cells": cs})
			}
			k, err := parseKeyArgs(args)
			if err != nil {
				return err
			}
			c, err := cl.GetCell(cmd.Context(), k)
			if err != nil {
				return err
			}
			return printJSON(c)
		},
	}
	f.register(cmd)
	return cmd
}

func newLatestCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "latest ROW_KEY COLUMN_KEY",
		Short: "Read the cell of a column with the highest ref key (get_cell_latest)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseKeyArgs(args)
			if err != nil {
				return err
			}
			cl, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			c, err := cl.GetCellLatest(cmd.Context(), k.RowKey, k.ColumnKey)
			if err != nil {
				return err
			}
			return printJSON(c)
		},
	}
	f.register(cmd)
	return cmd
}

func newVersionsCmd() *cobra.Command {
	var f clientFlags
	var from int64
	var limit int
	var order string
	var all bool
	cmd := &cobra.Command{
		Use:   "versions ROW_KEY COLUMN_KEY",
		Short: "Read the versions of a column, a page at a time, in ref key order (get_versions)",
		Long: "Read the cells of a column of a row in ref key order: --order asc (the default) from --from up, or desc\n" +
			"from --from down (without --from: from the lowest, or the highest). Prints {\"cells\": [...], \"next_ref_key\": N}:\n" +
			"pass N as --from to read the next page, or give --all to read every page.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseKeyArgs(args)
			if err != nil {
				return err
			}
			if order != "asc" && order != "desc" {
				return fmt.Errorf("--order %q: want asc or desc", order)
			}
			cl, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			var at *int64
			if cmd.Flags().Changed("from") {
				at = &from
			}
			var out []wire.Cell
			for {
				page, err := cl.GetVersions(cmd.Context(), k.RowKey, k.ColumnKey, at, limit, order == "desc")
				if err != nil {
					return err
				}
				out = append(out, page.Cells...)
				at = page.Next
				if !all || at == nil {
					break
				}
			}
			return printJSON(map[string]any{"cells": out, "next_ref_key": at})
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "first ref key of the page (inclusive); default: the lowest (asc) or highest (desc)")
	cmd.Flags().IntVar(&limit, "limit", 0, "cells per page (default: the server's, 100)")
	cmd.Flags().StringVar(&order, "order", "asc", "asc or desc")
	cmd.Flags().BoolVar(&all, "all", false, "read every page")
	f.register(cmd)
	return cmd
}

func newStatusCmd() *cobra.Command {
	var f clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show nodes, partitions, leaders and each replica's applied index",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStatus(cmd.Context(), f, asJSON)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each node's /v1/cluster answer as JSON")
	return cmd
}

// runStatus asks every endpoint for its view and prints one line per partition with the
// leader and each replica's applied index.
func runStatus(ctx context.Context, f clientFlags, asJSON bool) error {
	cfg := client.DefaultConfig()
	cfg.Endpoints, cfg.MaxAttempts, cfg.RequestTimeout = f.endpoints, 1, 2*time.Second
	if err := applyClientAuth(ctx, &cfg); err != nil {
		return err
	}
	cl, err := client.New(cfg)
	if err != nil {
		return err
	}
	sts, errs := make([]wire.ClusterStatus, len(f.endpoints)), make([]error, len(f.endpoints))
	for i, ep := range f.endpoints {
		sts[i], errs[i] = cl.ClusterAt(ctx, ep)
		if errs[i] == nil && asJSON {
			if err := printJSON(sts[i]); err != nil {
				return err
			}
		}
	}
	if asJSON {
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "PARTITION\tSHARDS\tLEADER")
	for i, st := range sts {
		name := st.Node
		if errs[i] != nil {
			name = f.endpoints[i]
		}
		fmt.Fprintf(tw, "\t%s", name)
	}
	fmt.Fprintln(tw)
	for _, v := range wire.PartitionViews(sts) {
		fmt.Fprintf(tw, "%s/%d\t%d-%d\t%s", v.Datastore, v.Partition, v.FirstShard, v.LastShard, v.Leader)
		for i, p := range v.Nodes {
			switch {
			case errs[i] != nil:
				fmt.Fprint(tw, "\tdown")
			case p.State == "":
				fmt.Fprint(tw, "\t-")
			default:
				fmt.Fprintf(tw, "\t%s applied=%d", strings.ToLower(p.State), p.AppliedIndex)
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, err := range errs {
		if err != nil {
			fmt.Printf("%s: %v\n", f.endpoints[i], err)
		}
	}
	return nil
}
