package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/spf13/cobra"
)

// moveFlags are the flags of `admin move-partition` beyond adminFlags.
type moveFlags struct {
	partition    int
	to           string
	dropOld      bool
	lockWait     time.Duration
	drainTimeout time.Duration
	dropGrace    time.Duration
}

func newAdminMoveCmd() *cobra.Command {
	var f adminFlags
	var mf moveFlags
	cmd := &cobra.Command{
		Use:   "move-partition --topology F --datastore D --partition P --to C [--drop-old]",
		Short: "Move a partition of an async datastore to another storage cluster, online",
		Long: `Move partition --partition of async datastore --datastore to storage cluster --to while the
nodes keep serving it: copy, catch up from the shard logs, switch, drain. It runs against the
MySQL masters directly (as --admin-user, like promote); no node needs to be reachable.

  1. The target is fenced (its copy names the current cluster in <prefix>_meta.placement).
  2. A consistent snapshot of the partition (cells, KV rows, index tables) is copied from the
     current master into the target master.
  3. Catch-up rounds copy the cells written since, keeping their added_id and created_at.
  4. Switch: under the partition's write lock (the one the nodes take) the old copy is fenced,
     the last cells and every KV row and index entry are copied, and the placement (epoch+1)
     names the target on every master. Nodes follow within a probe interval (0.5 s); a write
     meanwhile waits or is retried by the node, never fails.
  5. Drain: waits until the buffer rows written before the switch are reaped; with --drop-old
     then drops the old copy (its shard databases and KV rows; the fence stays).

--to must be one of the datastore's storage_clusters in the topology (a spare cluster holding
no partition is fine). Update partitions[].cluster in the topology afterwards, at leisure: the
placement record wins while it has the highest epoch. A failure after the old copy was fenced
rolls back (the old cluster serves again); rerunning after an interruption finishes the move.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.passwordSet = cmd.Flags().Changed("admin-password")
			if !cmd.Flags().Changed("partition") {
				return errors.New("--partition is required: the id of the partition to move")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			return runAdminMove(ctx, f, mf, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd, time.Hour)
	fl := cmd.Flags()
	fl.StringVar(&f.datastore, "datastore", "", "the async datastore (required)")
	fl.IntVar(&mf.partition, "partition", 0, "the id of the partition to move (required)")
	fl.StringVar(&mf.to, "to", "", "the storage cluster to move it to, by name (required)")
	fl.BoolVar(&mf.dropOld, "drop-old", false, "once drained, drop the old copy's shard databases and KV rows (the fence stays)")
	fl.DurationVar(&mf.lockWait, "lock-wait", 30*time.Second, "bound of the wait for the partition's write lock at the switch")
	fl.DurationVar(&mf.drainTimeout, "drain-timeout", 5*time.Minute, "bound of the wait for the buffer rows written before the switch to be reaped")
	fl.DurationVar(&mf.dropGrace, "drop-grace", 10*time.Second, "with --drop-old, the least time between the switch and the drop")
	return cmd
}

// moveReport is what `admin move-partition --json` prints.
type moveReport struct {
	Datastore         string  `json:"datastore"`
	Partition         int     `json:"partition"`
	From              string  `json:"from"`
	To                string  `json:"to"`
	Epoch             int64   `json:"epoch"`
	AlreadyThere      bool    `json:"already_there"`
	Resumed           bool    `json:"resumed"`
	CopiedCells       int64   `json:"copied_cells"`
	CopySeconds       float64 `json:"copy_seconds"`
	CatchUpRounds     []int64 `json:"catch_up_rounds"`
	FinalCells        int64   `json:"final_cells"`
	FinalKV           int     `json:"final_kv_rows"`
	FinalIndexEntries int64   `json:"final_index_entries"`
	LockHeldSeconds   float64 `json:"lock_held_seconds"`
	SwitchedAt        string  `json:"switched_at,omitempty"`
	Drained           bool    `json:"drained"`
	DrainSeconds      float64 `json:"drain_seconds"`
	Dropped           bool    `json:"dropped"`
	Seconds           float64 `json:"seconds"`
	Error             string  `json:"error,omitempty"`
}

func runAdminMove(ctx context.Context, f adminFlags, mf moveFlags, out, errOut io.Writer) error {
	if f.datastore == "" {
		return errors.New("--datastore is required: the async datastore whose partition to move")
	}
	if mf.to == "" {
		return errors.New("--to is required: the name of the storage cluster to move the partition to")
	}
	dss, err := adminDatastores(f)
	if err != nil {
		return err
	}
	ds := dss[0]
	if _, err := adminStorageCluster(ds, mf.to); err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	found := false
	for _, p := range ds.Partitions {
		found = found || p.ID == mf.partition
	}
	if !found {
		return fmt.Errorf("--partition %d: datastore %s has no such partition (it has ids 0..%d)", mf.partition, ds.Name, len(ds.Partitions)-1)
	}
	logger := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	res, merr := partition.MoveAsync(ctx, partition.AsyncMove{
		Datastore: ds, Partition: mf.partition, To: mf.to,
		DSN:     func(dsn string) (string, error) { return replication.WithUser(dsn, f.adminUser, f.password()) },
		Cluster: partition.ClusterConfig{Logger: logger},
		Move: partition.MoveConfig{LockWait: mf.lockWait, DrainTimeout: mf.drainTimeout, DropOld: mf.dropOld,
			DropGrace: mf.dropGrace, Logger: logger},
	})
	rep := moveReport{Datastore: ds.Name, Partition: mf.partition, From: res.From, To: mf.to, Epoch: res.Epoch,
		AlreadyThere: res.AlreadyThere, Resumed: res.Resumed, CopiedCells: res.CopiedCells, CopySeconds: res.CopyTime.Seconds(),
		CatchUpRounds: append([]int64{}, res.RoundCells...), FinalCells: res.FinalCells, FinalKV: res.FinalKV,
		FinalIndexEntries: res.FinalIndexEntries, LockHeldSeconds: res.LockHeld.Seconds(), Drained: res.Drained,
		DrainSeconds: res.DrainTime.Seconds(), Dropped: res.Dropped, Seconds: res.Took.Seconds()}
	if !res.SwitchedAt.IsZero() {
		rep.SwitchedAt = res.SwitchedAt.UTC().Format(time.RFC3339Nano)
	}
	if merr != nil {
		merr = fmt.Errorf("move partition %d of %s to %s: %w", mf.partition, ds.Name, mf.to, merr)
		rep.Error = merr.Error()
	}
	if f.asJSON {
		if err := adminWriteJSON(out, rep); err != nil {
			return err
		}
		return merr
	}
	if merr == nil {
		printMove(out, rep, f.topology)
	}
	return merr
}

func printMove(w io.Writer, r moveReport, topology string) {
	if r.AlreadyThere {
		fmt.Fprintf(w, "partition %d of %s is already on %s (placement epoch %d); nothing to move\n", r.Partition, r.Datastore, r.To, r.Epoch)
		if r.Dropped {
			fmt.Fprintf(w, "  old copies: drained and dropped (the fences stay)\n")
		}
		return
	}
	verb := "moved"
	if r.Resumed {
		verb = "finished moving"
	}
	fmt.Fprintf(w, "%s partition %d of %s from %s to %s (placement epoch %d) in %s\n", verb, r.Partition, r.Datastore, r.From, r.To, r.Epoch,
		secs(r.Seconds))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if !r.Resumed {
		fmt.Fprintf(tw, "  copied\t%d cells in %s\n", r.CopiedCells, secs(r.CopySeconds))
		rounds := make([]string, len(r.CatchUpRounds))
		for i, n := range r.CatchUpRounds {
			rounds[i] = fmt.Sprint(n)
		}
		fmt.Fprintf(tw, "  catch-up rounds\t%d (cells: %s)\n", len(r.CatchUpRounds), strings.Join(rounds, ", "))
		fmt.Fprintf(tw, "  lock held\t%s\n", secs(r.LockHeldSeconds))
	}
	fmt.Fprintf(tw, "  final catch-up\t%d cells, %d KV rows, %d index entries\n", r.FinalCells, r.FinalKV, r.FinalIndexEntries)
	fmt.Fprintf(tw, "  switched at\t%s\n", r.SwitchedAt)
	drained := "no: buffer rows written before the switch remain (the reapers replay them into the new cluster); the old copy was kept"
	if r.Drained {
		drained = "yes, in " + secs(r.DrainSeconds)
	}
	fmt.Fprintf(tw, "  drained\t%s\n", drained)
	old := "kept on " + r.From + " (fenced: it refuses writes); rerun with --drop-old to drop it"
	if r.Dropped {
		old = "dropped on " + r.From + " (the fence stays)"
	}
	fmt.Fprintf(tw, "  old copy\t%s\n", old)
	_ = tw.Flush()
	fmt.Fprintf(w, "The nodes follow the new placement by themselves within a probe interval (%v). Update partitions[].cluster\n", adminProbeInterval)
	fmt.Fprintf(w, "of partition %d in %s to %s when convenient.\n", r.Partition, topology, r.To)
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}

// newAdminMoveToClusterCmd is `admin move-to-cluster`: MoveToCluster through a node's API, for
// any partition of the catalog (move-partition reads the topology file and needs no node).
func newAdminMoveToClusterCmd() *cobra.Command {
	var f adminAPIFlags
	var p partitionFlags
	var req wire.ClusterMoveRequest
	cmd := &cobra.Command{
		Use:   "move-to-cluster --datastore D --partition P --to CLUSTER [--drop-old]",
		Short: "Move a partition of an async datastore to another storage cluster, through a node",
		Long: `Move partition --partition of async datastore --datastore to storage cluster --to (POST
/v1/admin/partitions/{ds}/{p}/cluster), online, as move-partition does (copy, catch-up from the
shard logs, a switch under the partition's lock fenced by placement records, drain), but run by
the answering node with the datastore as the catalog holds it: the way to move the right half of
a split (admin split --to does both). Running it again is safe: a finished move answers that the
partition is there already, an interrupted one is finished.

Errors: 400 --to not a storage cluster of the datastore, or a raft datastore (field datastore);
404 no such datastore or partition; 409 another move of the partition runs; 503 the move failed
after fencing and was rolled back (run it again).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(cmd); err != nil {
				return err
			}
			if req.To == "" {
				return errors.New("--to is required: the storage cluster to move the partition to")
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				res, err := cl.MoveToCluster(ctx, p.datastore, p.partition, req)
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, res)
				}
				printClusterMove(out, p.datastore, res)
				return nil
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	p.register(cmd)
	cmd.Flags().StringVar(&req.To, "to", "", "the storage cluster to move the partition to (required)")
	cmd.Flags().BoolVar(&req.DropOld, "drop-old", false, "drop the old copy once the buffer rows written before the switch are reaped")
	return cmd
}
