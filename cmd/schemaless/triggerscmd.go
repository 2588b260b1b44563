package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/spf13/cobra"
)

func newTriggersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "triggers",
		Short: "Follow shard logs and operate consumer groups (status, parked cells)",
		Long: `Triggers run code on cells as they land: the workers of a consumer group read the shard logs
(get_cells_for_shard, in added_id order), call a handler per cell and commit offsets to the
datastore (package triggers). These commands watch the logs and operate the groups:

  tail     print new cells as they land (read-only, no group)
  status   list the groups with their lag, or show one group's members, shards and parked cells
  parked   list, retry or drop the cells a group parked after its handler kept failing`,
	}
	cmd.AddCommand(newTriggersTailCmd(), newTriggersStatusCmd(), newTriggersParkedCmd())
	return cmd
}

// tailFlags are the flags of `triggers tail`.
type tailFlags struct {
	column string
	shards []int
	from   string
	limit  int
	asJSON bool
}

func newTriggersTailCmd() *cobra.Command {
	var cf clientFlags
	var f tailFlags
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print new cells of the shard logs as they land",
		Long: `Print the cells of the datastore's shard logs as they land, one line per cell:

  shard added_id created_at row_key column_key ref_key body

Cells of one shard come in added_id order; shards are interleaved. tail long-polls every shard at
once (a read returns as soon as any shard has a cell), from any replica by default
(--consistency stale: a replica may trail the leader by a few entries, never skips a cell). It
joins no consumer group and commits nothing: any number of tails can run, and stopping one loses
nothing. It runs until Ctrl-C or --limit cells.

--from says where each shard starts: latest (the cells written from now on), earliest (the whole
log), or an RFC 3339 time (the first cell created at or after it).`,
		Example: `  schemaless triggers tail
  schemaless triggers tail --column STATUS --limit 5
  schemaless triggers tail --from earliest --shards 0,1 --json
  schemaless triggers tail --from 2025-01-02T15:04:05Z`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			err = runTail(ctx, cl, f, cf.consistency, os.Stdout)
			if ctx.Err() != nil {
				return nil // Ctrl-C
			}
			return err
		},
	}
	cf.register(cmd)
	// A tail reads from any replica unless told otherwise.
	if fl := cmd.Flags().Lookup("consistency"); fl != nil {
		fl.DefValue = client.ConsistencyStale
		_ = fl.Value.Set(client.ConsistencyStale)
	}
	fl := cmd.Flags()
	fl.StringVar(&f.column, "column", "", "print only the cells of this column key")
	fl.IntSliceVar(&f.shards, "shards", nil, "shards to follow (comma-separated; default every shard of the datastore)")
	fl.StringVar(&f.from, "from", "latest", "where each shard starts: latest, earliest or an RFC 3339 time")
	fl.IntVar(&f.limit, "limit", 0, "stop after this many cells (0: run until Ctrl-C)")
	fl.BoolVar(&f.asJSON, "json", false, "print each cell as a JSON object (one per line) with its shard")
	return cmd
}

// tailLine is a cell as `triggers tail --json` prints it.
type tailLine struct {
	Shard int `json:"shard"`
	wire.Cell
}

// errTailLimit ends a tail that printed --limit cells.
var errTailLimit = errors.New("--limit cells printed")

// runTail follows the shard logs of cl's datastore (client.Tail) and prints their cells to w
// until ctx ends (returning ctx's error), f.limit cells were printed (nil), or a read fails.
func runTail(ctx context.Context, cl *client.Client, f tailFlags, consistency string, w io.Writer) error {
	if f.limit < 0 {
		return fmt.Errorf("--limit %d: want 0 or more", f.limit)
	}
	opts := client.TailOptions{Shards: f.shards, ColumnKey: f.column}
	switch f.from {
	case "earliest":
		opts.Earliest = true
	case "latest":
	default:
		t, err := time.Parse(time.RFC3339Nano, f.from)
		if err != nil {
			return fmt.Errorf("--from %q: want latest, earliest or an RFC 3339 time (2006-01-02T15:04:05Z)", f.from)
		}
		opts.Since = t
	}
	printed := 0
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	err := cl.Tail(ctx, opts, func(shard int, c wire.Cell) error {
		if err := printTailCell(w, enc, shard, c, f.asJSON); err != nil {
			return err
		}
		if printed++; f.limit > 0 && printed >= f.limit {
			return errTailLimit
		}
		return nil
	}, client.WithConsistency(consistency))
	if errors.Is(err, errTailLimit) {
		return nil
	}
	return err
}

func printTailCell(w io.Writer, enc *json.Encoder, shard int, c wire.Cell, asJSON bool) error {
	if asJSON {
		return enc.Encode(tailLine{Shard: shard, Cell: c})
	}
	var body bytes.Buffer
	if err := json.Compact(&body, c.Body); err != nil {
		body.Reset()
		body.Write(c.Body)
	}
	_, err := fmt.Fprintf(w, "%d %d %s %s %s %d %s\n", shard, c.AddedID, c.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000Z"),
		c.RowKey, c.ColumnKey, c.RefKey, body.Bytes())
	return err
}

func newTriggersStatusCmd() *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [GROUP]",
		Short: "List consumer groups with their lag, or show one group in detail",
		Long: `Without GROUP, list the datastore's consumer groups: live members, lag (cells of the shard
logs after the group's committed offsets, and the age of the oldest of them), parked cells and
whether the group is halted.

With GROUP, show its members (id, shards owned, session expiry), and per shard the owner, lease
epoch, committed offset (-1: none yet), the shard's high water, and the lag. Lag counts the
cells of every column after the committed offset (a group that filters on one column moves its
offset past the others as it reads). Workers commit after each read and with their heartbeats,
so a working group shows a small lag that returns to 0 when writes stop.`,
		Example: `  schemaless triggers status
  schemaless triggers status billing
  schemaless triggers status billing --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 1 {
				st, err := cl.GroupStatus(cmd.Context(), args[0])
				if err != nil {
					return groupErr(args[0], err)
				}
				if asJSON {
					return printJSON(st)
				}
				return printGroupStatus(os.Stdout, st, time.Now())
			}
			return listGroups(cmd.Context(), cl, asJSON)
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw status answer(s) as JSON")
	return cmd
}

// groupErr names the group in a not-found error.
func groupErr(group string, err error) error {
	if errors.Is(err, client.ErrNotFound) {
		return fmt.Errorf("group %q: no worker ever joined it (or no such datastore): %w", group, err)
	}
	return err
}

func listGroups(ctx context.Context, cl *client.Client, asJSON bool) error {
	sts, err := cl.GroupStatuses(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(sts)
	}
	if len(sts) == 0 {
		fmt.Printf("no consumer groups in datastore %s\n", cl.Datastore())
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tMEMBERS\tLAG_CELLS\tLAG_SECONDS\tPARKED\tHALTED")
	for _, st := range sts {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%d\t%t\n", st.Group, len(st.Members), st.LagCells, st.LagSeconds, len(st.Parked), st.Halted)
	}
	return tw.Flush()
}

// printGroupStatus prints one group's status as a header and two tables; now dates the members'
// session expiry.
func printGroupStatus(w io.Writer, st wire.GroupStatus, now time.Time) error {
	start := st.Start.Kind
	if st.Start.Time != nil {
		start += " " + st.Start.Time.UTC().Format(time.RFC3339)
	}
	retry := 0
	for _, p := range st.Parked {
		if p.Retry {
			retry++
		}
	}
	fmt.Fprintf(w, "group %s: generation %d, start %s, halted %t, parked %d (%d marked for retry), halt threshold %d\n",
		st.Group, st.Generation, start, st.Halted, len(st.Parked), retry, st.HaltThreshold)
	fmt.Fprintf(w, "lag: %d cells, oldest %.1fs\n\n", st.LagCells, st.LagSeconds)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSHARDS\tSESSION_EXPIRES")
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%d\t%s (in %.1fs)\n", m.ID, m.Shards, m.Expires.UTC().Format(time.RFC3339Nano), m.Expires.Sub(now).Seconds())
	}
	if len(st.Members) == 0 {
		fmt.Fprintln(tw, "(none)\t\t")
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "SHARD\tOWNER\tEPOCH\tOFFSET\tHIGH_WATER\tLAG_CELLS\tLAG_SECONDS")
	for _, s := range st.Shards {
		owner := s.Owner
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%.1f\n", s.Shard, owner, s.Epoch, s.Offset, s.HighWater, s.LagCells, s.LagSeconds)
	}
	return tw.Flush()
}

func newTriggersParkedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "parked",
		Short: "List, retry or drop a group's parked cells",
		Long: `A cell whose handler failed on every attempt is parked: the coordinator keeps it with its last
error and the group moves on. When the parked cells (not marked for retry) reach the group's halt
threshold, the group halts and every worker stops. Fix the cause, then retry the parked cells (the
shard's owner delivers them again; this also lifts the halt) or drop them.`,
	}
	var cf clientFlags
	var asJSON bool
	list := &cobra.Command{
		Use:     "list GROUP",
		Short:   "List a group's parked cells with their last error",
		Example: "  schemaless triggers parked list billing",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			st, err := cl.GroupStatus(cmd.Context(), args[0])
			if err != nil {
				return groupErr(args[0], err)
			}
			if asJSON {
				return printJSON(st.Parked)
			}
			return printParked(os.Stdout, st)
		},
	}
	cf.register(list)
	list.Flags().BoolVar(&asJSON, "json", false, "print the parked cells as JSON")
	cmd.AddCommand(list,
		newParkedOpCmd(client.GroupRetry, "Mark parked cells for redelivery by their shard's owner",
			"marked for retry", "  schemaless triggers parked retry billing 3 4\n  schemaless triggers parked retry billing --all"),
		newParkedOpCmd(client.GroupDrop, "Delete parked cells without delivering them",
			"dropped", "  schemaless triggers parked drop billing 7\n  schemaless triggers parked drop billing --all"))
	return cmd
}

func printParked(w io.Writer, st wire.GroupStatus) error {
	if len(st.Parked) == 0 {
		fmt.Fprintf(w, "group %s: no parked cells\n", st.Group)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSHARD\tADDED_ID\tCELL\tATTEMPTS\tWORKER\tPARKED_AT\tRETRY\tERROR")
	for _, p := range st.Parked {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s/%s/%d\t%d\t%s\t%s\t%t\t%s\n", p.ID, p.Shard, p.AddedID, p.RowKey, p.ColumnKey, p.RefKey,
			p.Attempts, p.Worker, p.ParkedAt.UTC().Format(time.RFC3339), p.Retry, p.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if st.Halted {
		fmt.Fprintf(w, "group %s is halted: retry or drop parked cells to resume it\n", st.Group)
	}
	return nil
}

// newParkedOpCmd is `parked retry` or `parked drop`: op applied to the parked cells named by
// their IDs, or to all with --all.
func newParkedOpCmd(op, short, done, example string) *cobra.Command {
	var cf clientFlags
	var all bool
	cmd := &cobra.Command{
		Use:     op + " GROUP [ID...]",
		Short:   short,
		Example: example,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			if all == (len(args) > 1) {
				return errors.New("name parked cell IDs (see `schemaless triggers parked list`) or pass --all, not both")
			}
			gc := wire.GroupCommand{All: all}
			for _, a := range args[1:] {
				id, err := strconv.ParseUint(a, 10, 64)
				if err != nil {
					return fmt.Errorf("parked cell ID %q: want a non-negative integer", a)
				}
				gc.IDs = append(gc.IDs, id)
			}
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.GroupCommand(cmd.Context(), group, op, gc)
			if err != nil {
				return groupErr(group, err)
			}
			fmt.Printf("group %s: %d parked cells %s; %d parked cells not marked for retry, halted %t\n",
				group, res.Affected, done, res.Parked, res.Halted)
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "every parked cell of the group")
	return cmd
}
