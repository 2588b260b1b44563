package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/spf13/cobra"
)

// backupFormat is the version of manifest.json this build writes and reads.
const backupFormat = 1

// manifestName is the file naming a backup's contents; it is written last, so a directory
// with a manifest holds a complete backup.
const manifestName = "manifest.json"

// backupManifest is DIR/manifest.json.
type backupManifest struct {
	Format     int                 `json:"format"`
	Datastore  string              `json:"datastore"`
	Mode       string              `json:"mode"`
	Shards     int                 `json:"shards"`
	StartedAt  time.Time           `json:"started_at"`
	FinishedAt time.Time           `json:"finished_at"`
	Partitions []backupPartitionMF `json:"partitions"`
}

// backupPartitionMF is one partition in the manifest: its file and what the file holds.
// AppliedIndex and AppliedTerm are the raft entry of the source cluster the backup reflects.
type backupPartitionMF struct {
	ID              int               `json:"id"`
	FirstShard      int               `json:"first_shard"`
	LastShard       int               `json:"last_shard"`
	File            string            `json:"file"`
	Bytes           int64             `json:"bytes"`
	SHA256          string            `json:"sha256"`
	SnapshotVersion int               `json:"snapshot_version"`
	AppliedIndex    uint64            `json:"applied_index"`
	AppliedTerm     uint64            `json:"applied_term"`
	Cells           int64             `json:"cells"`
	KVRows          int64             `json:"kv_rows"`
	IndexEntries    int64             `json:"index_entries"`
	ShardStats      []api.ShardResult `json:"shard_stats"`
	StartedAt       time.Time         `json:"started_at"`
	FinishedAt      time.Time         `json:"finished_at"`
}

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
			m, err := readManifest(args[0])
			if err != nil {
				return err
			}
			if err := verifyBackup(args[0], m); err != nil {
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

// backupFile is the file name of partition id of ds.
func backupFile(ds string, id int) string { return fmt.Sprintf("%s-p%d.snap", ds, id) }

// clusterDatastore asks the cluster at endpoints for datastore ds.
func clusterDatastore(ctx context.Context, endpoints []string, ds string) (wire.DatastoreStatus, error) {
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cl, err := client.New(cfg)
	if err != nil {
		return wire.DatastoreStatus{}, err
	}
	st, err := cl.Cluster(ctx)
	if err != nil {
		return wire.DatastoreStatus{}, fmt.Errorf("GET /v1/cluster: %w", err)
	}
	var names []string
	for _, d := range st.Datastores {
		if d.Name == ds {
			return d, nil
		}
		names = append(names, d.Name)
	}
	return wire.DatastoreStatus{}, fmt.Errorf("datastore %q: no such datastore in the cluster (it has: %s)", ds, strings.Join(names, ", "))
}

func runBackup(ctx context.Context, f backupFlags, dir string, out io.Writer) error {
	if f.datastore == "" {
		return errors.New("--datastore is required")
	}
	if dir == "" {
		return errors.New("--out is required: the directory to write the backup into")
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("--out %s is not empty: a backup goes into an empty or new directory", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	spec, err := clusterDatastore(ctx, f.endpoints, f.datastore)
	if err != nil {
		return err
	}
	if spec.Mode != topology.ModeRaft {
		return fmt.Errorf("datastore %s is in mode %s: backup of async datastores: use MySQL tools on the storage clusters", spec.Name, spec.Mode)
	}
	m := backupManifest{Format: backupFormat, Datastore: spec.Name, Mode: spec.Mode, Shards: spec.Shards, StartedAt: time.Now().UTC()}
	hc := &http.Client{}
	for _, p := range spec.Partitions {
		mp, err := backupPartition(ctx, hc, f.endpoints, spec.Name, p, dir)
		if err != nil {
			return fmt.Errorf("partition %d: %w", p.ID, err)
		}
		m.Partitions = append(m.Partitions, mp)
	}
	m.FinishedAt = time.Now().UTC()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(dir, manifestName), append(b, '\n')); err != nil {
		return err
	}
	if f.asJSON {
		return adminWriteJSON(out, m)
	}
	fmt.Fprintf(out, "backed up %s (%d shards, %d partitions) into %s in %v\n", m.Datastore, m.Shards, len(m.Partitions), dir, m.FinishedAt.Sub(m.StartedAt).Round(time.Millisecond))
	printBackupTable(out, m.Partitions)
	return nil
}

// backupPartition streams partition p into DIR/<file>, trying the endpoints in turn until one
// starts the stream, and checks it as it arrives.
func backupPartition(ctx context.Context, hc *http.Client, endpoints []string, ds string, p wire.PartitionStatus, dir string) (backupPartitionMF, error) {
	mp := backupPartitionMF{ID: p.ID, FirstShard: p.FirstShard, LastShard: p.LastShard, File: backupFile(ds, p.ID), StartedAt: time.Now().UTC()}
	path := filepath.Join(dir, mp.File)
	res, err := tryEndpoints(ctx, endpoints, func(base string) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/admin/backup/"+url.PathEscape(ds)+"/"+fmt.Sprint(p.ID), nil)
	}, hc)
	if err != nil {
		return mp, err
	}
	defer res.Body.Close()
	file, err := os.Create(path + ".partial")
	if err != nil {
		return mp, err
	}
	defer file.Close()
	sum := sha256.New()
	bw := bufio.NewWriterSize(file, 256<<10)
	info, err := fsm.VerifySnapshot(io.TeeReader(res.Body, io.MultiWriter(bw, sum)))
	if err != nil {
		return mp, fmt.Errorf("the stream from the cluster: %w", err)
	}
	mp.SHA256 = hex.EncodeToString(sum.Sum(nil))
	if server := res.Trailer.Get(api.TrailerSHA256); server != "" && server != mp.SHA256 {
		return mp, fmt.Errorf("the server sent a stream with SHA-256 %s, %s arrived", server, mp.SHA256)
	}
	if info.Header.FirstShard != p.FirstShard || info.Header.LastShard != p.LastShard {
		return mp, fmt.Errorf("the stream holds shards %d..%d, the partition %d..%d", info.Header.FirstShard, info.Header.LastShard, p.FirstShard, p.LastShard)
	}
	if err := bw.Flush(); err != nil {
		return mp, err
	}
	if err := file.Sync(); err != nil {
		return mp, err
	}
	if err := file.Close(); err != nil {
		return mp, err
	}
	if err := os.Rename(path+".partial", path); err != nil {
		return mp, err
	}
	fillFromInfo(&mp, info)
	mp.FinishedAt = time.Now().UTC()
	return mp, nil
}

func fillFromInfo(mp *backupPartitionMF, info fsm.BackupInfo) {
	mp.Bytes = info.Bytes
	mp.SnapshotVersion = info.Header.Version
	mp.AppliedIndex, mp.AppliedTerm = info.Header.Applied.Index, info.Header.Applied.Term
	mp.Cells, mp.KVRows, mp.IndexEntries = info.Cells, info.KVs, info.IndexEntries
	mp.ShardStats = make([]api.ShardResult, len(info.Shards))
	for i, s := range info.Shards {
		mp.ShardStats[i] = api.ShardResult{Shard: s.Shard, MaxAddedID: s.MaxAddedID, Cells: s.Cells}
	}
}

// tryEndpoints sends the request newReq builds to each endpoint in turn until one answers 200,
// and returns that answer. A node that cannot be reached (nothing was sent) or answers 503 (no
// leader yet, say: nothing was done) is passed over; the endpoints are tried up to three times, a second apart. Another answer is an
// error with the API's message.
func tryEndpoints(ctx context.Context, endpoints []string, newReq func(base string) (*http.Request, error), hc *http.Client) (*http.Response, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("--endpoints is empty")
	}
	var last error
	for round := 0; round < 3; round++ {
		if round > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%w (last: %w)", ctx.Err(), last)
			case <-time.After(time.Second):
			}
		}
		for _, ep := range endpoints {
			req, err := newReq(strings.TrimRight(ep, "/"))
			if err != nil {
				return nil, err
			}
			res, err := hc.Do(req)
			if err != nil {
				var oe *net.OpError
				if errors.As(err, &oe) && oe.Op == "dial" {
					last = fmt.Errorf("%s: %w", ep, err) // not reached: nothing was sent
					continue
				}
				return nil, fmt.Errorf("%s: %w", ep, err)
			}
			if res.StatusCode == http.StatusOK {
				return res, nil
			}
			err = apiError(ep, res)
			res.Body.Close()
			if res.StatusCode == http.StatusServiceUnavailable {
				last = err
				continue
			}
			return nil, err
		}
	}
	return nil, fmt.Errorf("no endpoint answered: %w", last)
}

// apiError reads the API's JSON error out of res.
func apiError(ep string, res *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var eb wire.ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
		return fmt.Errorf("%s answered %d %s: %s", ep, res.StatusCode, eb.Error.Code, eb.Error.Message)
	}
	return fmt.Errorf("%s answered %d: %s", ep, res.StatusCode, strings.TrimSpace(string(data)))
}

func readManifest(dir string) (backupManifest, error) {
	var m backupManifest
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return m, fmt.Errorf("%s: no readable backup manifest: %w", dir, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, manifestName), err)
	}
	if m.Format != backupFormat {
		return m, fmt.Errorf("%s: format %d, this build reads format %d", filepath.Join(dir, manifestName), m.Format, backupFormat)
	}
	if m.Mode != topology.ModeRaft || len(m.Partitions) == 0 {
		return m, fmt.Errorf("%s: a backup of %q with %d partitions is not one this build wrote", filepath.Join(dir, manifestName), m.Mode, len(m.Partitions))
	}
	return m, nil
}

// verifyBackup checks every file of m in dir: size, SHA-256, and the stream against the
// manifest's counts.
func verifyBackup(dir string, m backupManifest) error {
	for _, mp := range m.Partitions {
		if err := verifyBackupFile(dir, mp); err != nil {
			return fmt.Errorf("partition %d: %w", mp.ID, err)
		}
	}
	return nil
}

func verifyBackupFile(dir string, mp backupPartitionMF) error {
	if mp.File != filepath.Base(mp.File) {
		return fmt.Errorf("file %q: not a file name", mp.File)
	}
	f, err := os.Open(filepath.Join(dir, mp.File))
	if err != nil {
		return err
	}
	defer f.Close()
	sum := sha256.New()
	info, verr := fsm.VerifySnapshot(io.TeeReader(f, sum))
	if verr != nil {
		// Read the rest, so that the checksum names the fault when it is one.
		_, _ = io.Copy(sum, f)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != mp.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, the manifest says %s: the file changed since the backup", mp.File, got, mp.SHA256)
	}
	if verr != nil {
		return fmt.Errorf("%s: %w", mp.File, verr)
	}
	var got backupPartitionMF
	fillFromInfo(&got, info)
	switch {
	case got.Bytes != mp.Bytes:
		return fmt.Errorf("%s: %d bytes, the manifest says %d", mp.File, got.Bytes, mp.Bytes)
	case info.Header.FirstShard != mp.FirstShard || info.Header.LastShard != mp.LastShard:
		return fmt.Errorf("%s: shards %d..%d, the manifest says %d..%d", mp.File, info.Header.FirstShard, info.Header.LastShard, mp.FirstShard, mp.LastShard)
	case got.AppliedIndex != mp.AppliedIndex || got.AppliedTerm != mp.AppliedTerm || got.SnapshotVersion != mp.SnapshotVersion:
		return fmt.Errorf("%s: header (version %d, index %d, term %d) differs from the manifest's (%d, %d, %d)", mp.File,
			got.SnapshotVersion, got.AppliedIndex, got.AppliedTerm, mp.SnapshotVersion, mp.AppliedIndex, mp.AppliedTerm)
	case got.Cells != mp.Cells || got.KVRows != mp.KVRows || got.IndexEntries != mp.IndexEntries:
		return fmt.Errorf("%s: %d cells, %d KV rows, %d index entries; the manifest says %d, %d, %d", mp.File,
			got.Cells, got.KVRows, got.IndexEntries, mp.Cells, mp.KVRows, mp.IndexEntries)
	}
	if len(got.ShardStats) != len(mp.ShardStats) {
		return fmt.Errorf("%s: %d shards, the manifest lists %d", mp.File, len(got.ShardStats), len(mp.ShardStats))
	}
	for i := range got.ShardStats {
		if got.ShardStats[i] != mp.ShardStats[i] {
			return fmt.Errorf("%s: shard %+v, the manifest says %+v", mp.File, got.ShardStats[i], mp.ShardStats[i])
		}
	}
	return nil
}

func runRestore(ctx context.Context, f backupFlags, dir string, force bool, out io.Writer) error {
	if dir == "" {
		return errors.New("--from is required: the directory of the backup")
	}
	m, err := readManifest(dir)
	if err != nil {
		return err
	}
	if err := verifyBackup(dir, m); err != nil {
		return fmt.Errorf("the backup in %s does not check out, nothing restored: %w", dir, err)
	}
	ds := f.datastore
	if ds == "" {
		ds = m.Datastore
	}
	spec, err := clusterDatastore(ctx, f.endpoints, ds)
	if err != nil {
		return err
	}
	if err := sameLayout(m, spec); err != nil {
		return fmt.Errorf("nothing restored: %w", err)
	}
	if !force {
		if err := checkTargetEmpty(ctx, f.endpoints, spec); err != nil {
			return err
		}
	}
	start := time.Now()
	hc := &http.Client{}
	for _, mp := range m.Partitions {
		res, err := restorePartition(ctx, hc, f.endpoints, ds, dir, mp, force)
		if err != nil {
			return fmt.Errorf("partition %d: %w", mp.ID, err)
		}
		if res.Cells != mp.Cells || res.KVRows != mp.KVRows || res.IndexEntries != mp.IndexEntries || res.AppliedIndex != mp.AppliedIndex {
			return fmt.Errorf("partition %d: the cluster restored %d cells, %d KV rows, %d index entries of index %d; the manifest says %d, %d, %d of %d",
				mp.ID, res.Cells, res.KVRows, res.IndexEntries, res.AppliedIndex, mp.Cells, mp.KVRows, mp.IndexEntries, mp.AppliedIndex)
		}
	}
	if f.asJSON {
		return adminWriteJSON(out, struct {
			Datastore string              `json:"datastore"`
			From      string              `json:"from"`
			Restored  []backupPartitionMF `json:"restored"`
		}{ds, dir, m.Partitions})
	}
	fmt.Fprintf(out, "restored the backup of %s taken at %s into %s in %v\n", m.Datastore, m.StartedAt.Format(time.RFC3339), ds, time.Since(start).Round(time.Millisecond))
	printBackupTable(out, m.Partitions)
	return nil
}

// sameLayout checks that the target datastore has the backup's shards and partitions.
func sameLayout(m backupManifest, spec wire.DatastoreStatus) error {
	if spec.Mode != topology.ModeRaft {
		return fmt.Errorf("datastore %s is in mode %s: restores go into raft datastores", spec.Name, spec.Mode)
	}
	if spec.Shards != m.Shards {
		return fmt.Errorf("datastore %s has %d shards, the backup %d: a backup restores only into the same shard count", spec.Name, spec.Shards, m.Shards)
	}
	if len(spec.Partitions) != len(m.Partitions) {
		return fmt.Errorf("datastore %s has %d partitions, the backup %d", spec.Name, len(spec.Partitions), len(m.Partitions))
	}
	for i, p := range spec.Partitions {
		b := m.Partitions[i]
		if p.ID != b.ID || p.FirstShard != b.FirstShard || p.LastShard != b.LastShard {
			return fmt.Errorf("datastore %s partition %d holds shards %d..%d, the backup's partition %d holds %d..%d",
				spec.Name, p.ID, p.FirstShard, p.LastShard, b.ID, b.FirstShard, b.LastShard)
		}
	}
	return nil
}

// checkTargetEmpty refuses a target datastore a shard of which holds a cell.
func checkTargetEmpty(ctx context.Context, endpoints []string, spec wire.DatastoreStatus) error {
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.Datastore = spec.Name
	cl, err := client.New(cfg)
	if err != nil {
		return err
	}
	var full []string
	for _, p := range spec.Partitions {
		for s := p.FirstShard; s <= p.LastShard; s++ {
			page, err := cl.ShardCells(ctx, s, 0, 1)
			if err != nil {
				return fmt.Errorf("checking that shard %d is empty: %w", s, err)
			}
			if len(page.Cells) > 0 || page.HighWater > 0 {
				full = append(full, fmt.Sprint(p.ID))
				break
			}
		}
	}
	if len(full) > 0 {
		return fmt.Errorf("nothing restored: partitions %s of %s hold cells; restore with --force to replace them", strings.Join(full, ", "), spec.Name)
	}
	return nil
}

// restorePartition sends mp's file to the cluster.
func restorePartition(ctx context.Context, hc *http.Client, endpoints []string, ds, dir string, mp backupPartitionMF, force bool) (api.RestoreResult, error) {
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	res, err := tryEndpoints(ctx, endpoints, func(base string) (*http.Request, error) {
		f, err := os.Open(filepath.Join(dir, mp.File))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		u := base + "/v1/admin/restore/" + url.PathEscape(ds) + "/" + fmt.Sprint(mp.ID)
		if force {
			u += "?force=true"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, f)
		if err != nil {
			return nil, err
		}
		req.ContentLength = mp.Bytes
		req.Header.Set("Content-Type", "application/octet-stream")
		return req, nil
	}, hc)
	if err != nil {
		return api.RestoreResult{}, err
	}
	defer res.Body.Close()
	var rr api.RestoreResult
	if err := json.NewDecoder(res.Body).Decode(&rr); err != nil {
		return rr, fmt.Errorf("restore answer: %w", err)
	}
	return rr, nil
}

func printBackupTable(w io.Writer, ps []backupPartitionMF) {
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

// writeFileSync writes b to path through a temporary file, synced and renamed, then syncs the
// directory.
func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
