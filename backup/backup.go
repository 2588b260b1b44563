package backup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Backup backs up every partition of raft datastore ds of the cluster cl talks to into dir,
// which must be empty or absent (ErrDirNotEmpty; it is created), and returns the manifest it
// wrote there last. It takes the datastore's layout from any node (client.Cluster), then streams
// the partitions one after another (client.Backup), each into its file, checking it as it
// arrives; cl's retries apply until a node starts a stream. It blocks until every partition is
// written or ctx is done; bound it with ctx.
//
// On an error the directory keeps the files written so far, without a manifest (a file still
// being written is named <file>.partial). Errors: ErrDirNotEmpty, an unknown or async
// datastore, the client's errors (wrapped with the partition), a stream that does not verify,
// or the file system's.
func Backup(ctx context.Context, cl *client.Client, ds, dir string) (Manifest, error) {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return Manifest{}, fmt.Errorf("%s: %w", dir, ErrDirNotEmpty)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Manifest{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Manifest{}, err
	}
	spec, err := clusterDatastore(ctx, cl, ds)
	if err != nil {
		return Manifest{}, err
	}
	if spec.Mode != topology.ModeRaft {
		return Manifest{}, fmt.Errorf("datastore %s is in mode %s: backup of async datastores: use MySQL tools on the storage clusters", spec.Name, spec.Mode)
	}
	m := Manifest{Format: FormatVersion, Datastore: spec.Name, Mode: spec.Mode, Shards: spec.Shards, StartedAt: time.Now().UTC()}
	for _, p := range spec.Partitions {
		mp, err := backupPartition(ctx, cl, spec.Name, p, dir)
		if err != nil {
			return Manifest{}, fmt.Errorf("partition %d: %w", p.ID, err)
		}
		m.Partitions = append(m.Partitions, mp)
	}
	m.FinishedAt = time.Now().UTC()
	if err := writeManifest(dir, m); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// clusterDatastore asks the cluster for datastore ds.
func clusterDatastore(ctx context.Context, cl *client.Client, ds string) (wire.DatastoreStatus, error) {
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

// verified is the outcome of checking a stream.
type verified struct {
	info fsm.BackupInfo
	err  error
}

// backupPartition streams partition p into dir/<file>, through <file>.partial, checking it as it
// arrives (fsm.VerifySnapshot, beside the write) and syncing it before the rename.
func backupPartition(ctx context.Context, cl *client.Client, ds string, p wire.PartitionStatus, dir string) (Partition, error) {
	mp := Partition{ID: p.ID, FirstShard: p.FirstShard, LastShard: p.LastShard, File: FileName(ds, p.ID), StartedAt: time.Now().UTC()}
	path := filepath.Join(dir, mp.File)
	file, err := os.Create(path + ".partial")
	if err != nil {
		return mp, err
	}
	defer file.Close()
	bw := bufio.NewWriterSize(file, 256<<10)
	// The verifier reads what the client writes. If it fails first it closes the pipe with its
	// error, which the client's next write returns, ending the stream.
	pr, pw := io.Pipe()
	done := make(chan verified, 1)
	go func() {
		info, err := fsm.VerifySnapshot(pr)
		if err != nil {
			pr.CloseWithError(err)
		} else {
			_, _ = io.Copy(io.Discard, pr)
		}
		done <- verified{info, err}
	}()
	binfo, berr := cl.Backup(ctx, ds, p.ID, io.MultiWriter(bw, pw))
	pw.CloseWithError(berr) // nil: the verifier reads io.EOF
	v := <-done
	if berr != nil && (v.err == nil || !errors.Is(berr, v.err)) {
		return mp, berr // the client's failure, which the verifier saw as the end of its input
	}
	if v.err != nil {
		return mp, fmt.Errorf("the stream from the cluster: %w", v.err)
	}
	if v.info.Header.FirstShard != p.FirstShard || v.info.Header.LastShard != p.LastShard {
		return mp, fmt.Errorf("the stream holds shards %d..%d, the partition %d..%d", v.info.Header.FirstShard, v.info.Header.LastShard, p.FirstShard, p.LastShard)
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
	fillFromInfo(&mp, v.info)
	mp.SHA256 = binfo.SHA256
	mp.FinishedAt = time.Now().UTC()
	return mp, nil
}
