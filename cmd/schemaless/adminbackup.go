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
	var force bool
	cmd := &cobra.Command{
		Use:   "restore --endpoints URLS --from DIR [--datastore D] [--force]",
		Short: "Restore a backup written by admin backup into a cluster",
		Long: `Restore the backup in --from into datastore --datastore (default: the backup's datastore) of the
cluster at --endpoints, partition by partition (POST /v1/admin/restore/<datastore>/<id>).

Before touching the cluster it checks every file against the manifest (size, SHA-256, stream),
that the target datastore exists in raft mode with the same shard count and the same partitions
(ids and shard ranges), and, without --force, that no shard of the target holds a cell. Then each
partition's state (cells, consumer groups, index catalog and index tables) is replaced on every
replica: raft installs the backup as a snapshot, and the restore returns once a quorum holds it.

Stop writers to the target first: writes during a restore fail or are replaced. A restore that
fails part way leaves the partitions before it restored and the others as they were; rerun it
with --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			return runRestore(ctx, f, from, force, cmd.OutOrStdout())
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&from, "from", "", "directory of the backup (required)")
	cmd.Flags().StringVar(&f.datastore, "datastore", "", "datastore to restore into (default: the backup's)")
	cmd.Flags().BoolVar(&force, "force", false, "replace partitions that hold cells")
	return cmd
}

func runBackup(ctx context.Context, f backupFlags, dir string, out io.Writer) error {
	if f.datastore == "" {
		return errors.New("--datastore is required")
	}
	if dir == "" {
		return errors.New("--out is required: the directory to write the backup into")
	}
	cl, err := newAdminClient(f.endpoints, f.timeout)
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

func runRestore(ctx context.Context, f backupFlags, dir string, force bool, out io.Writer) error {
	if dir == "" {
		return errors.New("--from is required: the directory of the backup")
	}
	cl, err := newAdminClient(f.endpoints, f.timeout)
	if err != nil {
		return err
	}
	start := time.Now()
	m, err := backup.Restore(ctx, cl, dir, backup.RestoreOptions{Datastore: f.datastore, Force: force})
	var ne *backup.NotEmptyError
	if errors.As(err, &ne) {
		ids := make([]string, len(ne.Partitions))
		for i, id := range ne.Partitions {
			ids[i] = fmt.Sprint(id)
		}
		return fmt.Errorf("nothing restored: partitions %s of %s hold cells; restore with --force to replace them", strings.Join(ids, ", "), ne.Datastore)
	}
	if err != nil {
		return err
	}
	ds := f.datastore
	if ds == "" {
		ds = m.Datastore
	}
	if f.asJSON {
		return adminWriteJSON(out, struct {
			Datastore string             `json:"datastore"`
			From      string             `json:"from"`
			Restored  []backup.Partition `json:"restored"`
		}{ds, dir, m.Partitions})
	}
	fmt.Fprintf(out, "restored the backup of %s taken at %s into %s in %v\n", m.Datastore, m.StartedAt.Format(time.RFC3339), ds, time.Since(start).Round(time.Millisecond))
	printBackupTable(out, m.Partitions)
	return nil
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
