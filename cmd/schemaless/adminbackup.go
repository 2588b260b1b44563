package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schemaless-db/schemaless/backup"
	"github.com/spf13/cobra"
)

// backupFlags are the flags of the backup commands.
type backupFlags struct {
	endpoints []string
	datastore string
	timeout   time.Duration
	asJSON    bool
}

func (f *backupFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.endpoints, "endpoints", []string{"http://127.0.0.1:7070", "http://127.0.0.1:7071", "http://127.0.0.1:7072"}, "nodes' HTTP base URLs (comma-separated); any node serves any partition")
	fl.DurationVar(&f.timeout, "timeout", 24*time.Hour, "time limit of the whole command")
	fl.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
}

func newAdminBackupCmds() []*cobra.Command {
	return []*cobra.Command{newAdminBackupCmd(), newAdminRestoreCmd()}
}

func newAdminBackupCmd() *cobra.Command {
	var f backupFlags
	var out string
	cmd := &cobra.Command{
		Use:   "backup --endpoints URLS --datastore D --out DIR",
		Short: "Back up a raft datastore to files, one consistent snapshot per partition",
		Long: `Back up every partition of raft datastore --datastore into --out, which must be empty or absent:
DIR/<datastore>-p<id>.snap per partition (the partition's snapshot stream, GET
/v1/admin/backup/<datastore>/<id>) and DIR/manifest.json, written last, naming the datastore's
layout and, per partition, the raft index and term the backup reflects, its cells, KV rows and
index entries, each shard's highest added_id and cell count, and the file's size and SHA-256.

Each partition's backup is taken on its leader after a read index, so it holds every write
acknowledged before that partition's backup started, as one consistent point of that partition;
writes may go on meanwhile. Partitions are backed up one after another: the backup is not one
point in time across partitions. Every stream is checked as it arrives (records, order, trailer
counts) and against the server's SHA-256.

Async datastores are refused: back up their storage clusters with MySQL's tools.

  schemaless admin backup verify DIR       re-check a backup's files offline
  schemaless admin restore --from DIR      restore it into a cluster`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			return runBackup(ctx, f, out, cmd.OutOrStdout())
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&f.datastore, "datastore", "", "the raft datastore to back up (required)")
	cmd.Flags().StringVar(&out, "out", "", "directory to write the backup into; must be empty or absent (required)")
	cmd.AddCommand(newAdminBackupVerifyCmd())
	return cmd
}

func newAdminBackupVerifyCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify DIR",
		Short: "Check a backup's files against its manifest, offline",
		Long: `Check every file of the backup in DIR against DIR/manifest.json without any node: its size and
SHA-256, and its stream (header, records, order, trailer counts, per-shard added_ids and cell
counts). Exits non-zero on the first mismatch.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := backup.ReadManifest(args[0])
			if err != nil {
				return err
			}
			if err := backup.Verify(args[0], m); err != nil {
				return err
			}
			if asJSON {
				return adminWriteJSON(cmd.OutOrStdout(), m)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup of %s (%d shards) in %s: every file checks out\n", m.Datastore, m.Shards, args[0])
			printBackupTable(cmd.OutOrStdout(), m.Partitions)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the manifest as JSON")
	return cmd
}

func newAdminRestoreCmd() *cobra.Command {
	var f backupFlags
	var from string
	var ro restoreFlags
	cmd := &cobra.Command{
		Use:   "restore --endpoints URLS --from DIR [--datastore D] [--dry-run | --force | --accept-lost-cells N]",
		Short: "Restore a backup written by admin backup into a cluster",
		Long: `Restore the backup in --from into datastore --datastore (default: the backup's datastore) of the
cluster at --endpoints, partition by partition (POST /v1/admin/restore/<datastore>/<id>).

Before touching the cluster it checks every file against the manifest (size, SHA-256, stream),
that the target datastore exists in raft mode with the same shard count and the same partitions
(ids and shard ranges), and, without --force or --accept-lost-cells, that no shard of the target
holds a cell. Then each partition's state (cells, consumer groups, index catalog and index tables)
is replaced on every replica: raft installs the backup as a snapshot, and the restore returns once
a quorum holds it.

Cells lost: a partition's cells are compared with its backup's by key (shard, row key, column
key, ref key). A cell of the target whose key the backup lacks (one written after the backup)
would be dropped by the restore: it is "lost".

  --dry-run                 sends every file as a dry run (nothing changes) and prints, per
                            partition and in total, the backup's cells, the target's cells and
                            the cells lost.
  --force                   replaces partitions that hold cells only if no cell is lost (a
                            total of 0); otherwise it is refused and nothing is restored.
  --accept-lost-cells N     N is the TOTAL over all partitions, as --dry-run printed it: the
                            restore dry-runs first and proceeds only if the total is N; each
                            partition is then restored accepting exactly its own count, so a
                            partition written to meanwhile is refused by its node, not emptied
                            of more cells than printed.

Stop writers to the target first: writes during a restore wait until it ends and land after it,
or fail. A restore that fails part way leaves the partitions before it restored and the others as
they were; rerun it (a dry run tells what it would drop now).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			if cmd.Flags().Changed("accept-lost-cells") {
				if ro.acceptN < 0 {
					return fmt.Errorf("--accept-lost-cells %d: must be a count of cells >= 0 (the total --dry-run printed)", ro.acceptN)
				}
				ro.accept = &ro.acceptN
			}
			if ro.dryRun && (ro.force || ro.accept != nil) {
				return errors.New("--dry-run changes nothing: give it without --force or --accept-lost-cells")
			}
			return runRestore(ctx, f, from, ro, cmd.OutOrStdout())
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&from, "from", "", "directory of the backup (required)")
	cmd.Flags().StringVar(&f.datastore, "datastore", "", "datastore to restore into (default: the backup's)")
	cmd.Flags().BoolVar(&ro.dryRun, "dry-run", false, "change nothing; print per partition and in total the cells a restore would drop")
	cmd.Flags().BoolVar(&ro.force, "force", false, "replace partitions that hold cells, if every one of those cells is in the backup")
	cmd.Flags().Int64Var(&ro.acceptN, "accept-lost-cells", 0, "restore even though it drops cells absent from the backup: the TOTAL number, as --dry-run printed it")
	return cmd
}

// restoreFlags are the flags of admin restore that shape what it may replace.
type restoreFlags struct {
	dryRun  bool
	force   bool
	acceptN int64  // --accept-lost-cells
	accept  *int64 // &acceptN when --accept-lost-cells is given
}

func runBackup(ctx context.Context, f backupFlags, dir string, out io.Writer) error {
	if f.datastore == "" {
		return errors.New("--datastore is required")
	}
	if dir == "" {
		return errors.New("--out is required: the directory to write the backup into")
	}
	cl, err := newAdminClient(ctx, f.endpoints, f.timeout)
	if err != nil {
		return err
	}
	m, err := backup.Backup(ctx, cl, f.datastore, dir)
	if errors.Is(err, backup.ErrDirNotEmpty) {
		return fmt.Errorf("--out %s is not empty: a backup goes into an empty or new directory", dir)
	}
	if err != nil {
		return err
	}
	if f.asJSON {
		return adminWriteJSON(out, m)
	}
	fmt.Fprintf(out, "backed up %s (%d shards, %d partitions) into %s in %v\n", m.Datastore, m.Shards, len(m.Partitions), dir, m.FinishedAt.Sub(m.StartedAt).Round(time.Millisecond))
	printBackupTable(out, m.Partitions)
	return nil
}

func runRestore(ctx context.Context, f backupFlags, dir string, ro restoreFlags, out io.Writer) error {
	if dir == "" {
		return errors.New("--from is required: the directory of the backup")
	}
	cl, err := newAdminClient(ctx, f.endpoints, f.timeout)
	if err != nil {
		return err
	}
	start := time.Now()
	m, rep, err := backup.Restore(ctx, cl, dir, backup.RestoreOptions{Datastore: f.datastore, DryRun: ro.dryRun, Force: ro.force, AcceptLostCells: ro.accept})
	var ne *backup.NotEmptyError
	if errors.As(err, &ne) {
		ids := make([]string, len(ne.Partitions))
		for i, id := range ne.Partitions {
			ids[i] = fmt.Sprint(id)
		}
		return fmt.Errorf("nothing restored: partitions %s of %s hold cells; run with --dry-run to see how many a restore would drop, then with --force (none dropped) or --accept-lost-cells N", strings.Join(ids, ", "), ne.Datastore)
	}
	var cle *backup.CellsLostError
	if errors.As(err, &cle) {
		printLostTable(out, cle.Report)
		return fmt.Errorf("nothing restored: the restore would drop %d cells of %s that the backup does not hold (table above); to drop them, run with --accept-lost-cells %d",
			cle.Report.CellsLost, cle.Datastore, cle.Report.CellsLost)
	}
	if err != nil {
		return err
	}
	if ro.dryRun {
		if f.asJSON {
			return adminWriteJSON(out, struct {
				From   string        `json:"from"`
				DryRun backup.Report `json:"dry_run"`
			}{dir, rep})
		}
		fmt.Fprintf(out, "dry run of restoring the backup of %s taken at %s into %s: nothing changed; %d cells would be lost\n",
			m.Datastore, m.StartedAt.Format(time.RFC3339), rep.Datastore, rep.CellsLost)
		printLostTable(out, rep)
		return nil
	}
	if f.asJSON {
		return adminWriteJSON(out, struct {
			Datastore string             `json:"datastore"`
			From      string             `json:"from"`
			Restored  []backup.Partition `json:"restored"`
			Report    backup.Report      `json:"report"`
		}{rep.Datastore, dir, m.Partitions, rep})
	}
	fmt.Fprintf(out, "restored the backup of %s taken at %s into %s in %v; %d cells of the target replaced, %d of them not in the backup (lost)\n",
		m.Datastore, m.StartedAt.Format(time.RFC3339), rep.Datastore, time.Since(start).Round(time.Millisecond), rep.TargetCells, rep.CellsLost)
	printBackupTable(out, m.Partitions)
	return nil
}

// printLostTable prints a restore report: per partition the backup's cells, the target's and
// those lost, then the totals.
func printLostTable(w io.Writer, rep backup.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tBACKUP_CELLS\tTARGET_CELLS\tCELLS_LOST")
	var backupCells int64
	for _, p := range rep.Partitions {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\n", p.ID, p.BackupCells, p.TargetCells, p.CellsLost)
		backupCells += p.BackupCells
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\n", backupCells, rep.TargetCells, rep.CellsLost)
	_ = tw.Flush()
}

func printBackupTable(w io.Writer, ps []backup.Partition) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSHARDS\tFILE\tBYTES\tCELLS\tKV_ROWS\tINDEX_ENTRIES\tAPPLIED\tSHA256")
	var cells, kv, idx, bytes int64
	for _, p := range ps {
		fmt.Fprintf(tw, "%d\t%d..%d\t%s\t%d\t%d\t%d\t%d\t%d/%d\t%s\n", p.ID, p.FirstShard, p.LastShard, p.File, p.Bytes,
			p.Cells, p.KVRows, p.IndexEntries, p.AppliedIndex, p.AppliedTerm, p.SHA256[:min(12, len(p.SHA256))])
		cells, kv, idx, bytes = cells+p.Cells, kv+p.KVRows, idx+p.IndexEntries, bytes+p.Bytes
	}
	fmt.Fprintf(tw, "total\t\t\t%d\t%d\t%d\t%d\t\t\n", bytes, cells, kv, idx)
	_ = tw.Flush()
}
