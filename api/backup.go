package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Backup and restore of one partition of a raft datastore (see docs/api.md, "Backup and
// restore"):
//
//	GET  /v1/admin/backup/{ds}/{partition}              the partition's snapshot stream
//	POST /v1/admin/restore/{ds}/{partition}             replace the partition with one
//	     [?dry_run=true | ?force=true | ?accept_lost_cells=N]   (see wire.RestoreDryRunParam)
//
// The streams are long: these routes have no RequestTimeout; the client's connection bounds them.

// backupRoutes registers the backup and restore endpoints. Without a BackupBackend they
// answer 501 unimplemented.
func (s *Server) backupRoutes() {
	get, post := s.backupGet, s.restorePost
	if s.b.Backup == nil {
		hs := unimplemented(handlers{http.MethodGet: get, http.MethodPost: post}, wire.CodeUnimplemented, "this server does not back up or restore")
		get, post = hs[http.MethodGet], hs[http.MethodPost]
	}
	s.stream("/v1/admin/backup/{ds}/{partition}", http.MethodGet, get)
	s.stream("/v1/admin/restore/{ds}/{partition}", http.MethodPost, post)
}

// backupTarget checks the datastore and the partition of a backup or restore.
func (s *Server) backupTarget(r *http.Request) (ds string, pid int, err error) {
	q, err := s.parse(r, want{})
	if err != nil {
		return "", 0, err
	}
	if q.spec.Mode == topology.ModeAsync {
		return "", 0, backupError(fmt.Errorf("%w: backup of async datastores: use MySQL tools on the storage clusters", cluster.ErrAsyncDatastore))
	}
	text := r.PathValue("partition")
	pid, err = strconv.Atoi(text)
	if err != nil {
		return "", 0, invalid("partition", "%q is not a partition id", text)
	}
	for _, p := range q.spec.Partitions {
		if p.ID == pid {
			return q.ds, pid, nil
		}
	}
	return "", 0, notFound("datastore %s has no partition %d", q.ds, pid)
}

// backupError maps the errors of backups and restores to answers.
func backupError(err error) *httpError {
	var mbe *http.MaxBytesError
	var lost *cluster.CellsLostError
	switch {
	case errors.As(err, &lost):
		return &httpError{status: http.StatusConflict, code: wire.CodeConflict, field: wire.RestoreAcceptLostCellsParam, msg: lost.Error()}
	case errors.As(err, &mbe):
		return tooLarge("body", "the backup is larger than the server's limit of %d bytes (MaxRestoreBytes)", mbe.Limit)
	case errors.Is(err, cluster.ErrAsyncDatastore), errors.Is(err, cluster.ErrNoBackup):
		return &httpError{status: http.StatusNotImplemented, code: wire.CodeUnimplemented, msg: err.Error()}
	case errors.Is(err, cluster.ErrNotEmpty):
		return &httpError{status: http.StatusConflict, code: wire.CodeConflict, msg: err.Error()}
	case errors.Is(err, cluster.ErrBadSnapshot):
		return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: "body", msg: err.Error()}
	case errors.Is(err, cluster.ErrIndeterminate):
		return &httpError{status: http.StatusGatewayTimeout, code: wire.CodeIndeterminate, msg: err.Error() + " (the restore may or may not have taken effect; check the partition, and rerun it, after a dry run, if needed)"}
	}
	return backendError(err)
}

// backupGet streams a partition's backup. Until the stream's first bytes are ready, a failure
// is an error answer; after, the connection is broken (the client sees a truncated stream and
// no trailers).
func (s *Server) backupGet(w http.ResponseWriter, r *http.Request) error {
	ds, pid, err := s.backupTarget(r)
	if err != nil {
		return err
	}
	bw := &backupWriter{w: w, sum: sha256.New()}
	info, err := s.b.Backup.Backup(r.Context(), ds, pid, bw)
	if err == nil {
		err = bw.flush()
	}
	if err != nil {
		if !bw.started {
			return backupError(err)
		}
		s.cfg.Logger.Warn("api: backup stream broken", "datastore", ds, "partition", pid, "bytes", bw.n, "error", err)
		panic(http.ErrAbortHandler)
	}
	h := w.Header()
	h.Set(wire.TrailerCells, strconv.FormatInt(info.Cells, 10))
	h.Set(wire.TrailerKVRows, strconv.FormatInt(info.KVs, 10))
	h.Set(wire.TrailerIndexEntries, strconv.FormatInt(info.IndexEntries, 10))
	h.Set(wire.TrailerBytes, strconv.FormatInt(bw.n, 10))
	h.Set(wire.TrailerSHA256, hex.EncodeToString(bw.sum.Sum(nil)))
	return nil
}

// backupWriter holds back the start of the stream until its header decodes, then answers 200
// with the header's fields as HTTP headers and passes everything through, hashing it.
type backupWriter struct {
	w       http.ResponseWriter
	sum     hash.Hash
	head    []byte // held back until the header decodes
	started bool   // the answer's status is sent
	n       int64  // bytes sent
}

// maxHeldBack bounds what backupWriter holds back: a header is far smaller.
const maxHeldBack = 64 << 10

func (b *backupWriter) Write(p []byte) (int, error) {
	b.sum.Write(p)
	if b.started {
		n, err := b.w.Write(p)
		b.n += int64(n)
		return n, err
	}
	b.head = append(b.head, p...)
	h, err := cluster.ReadSnapshotHeader(bytes.NewReader(b.head))
	if err != nil && len(b.head) < maxHeldBack {
		return len(p), nil // not all of it yet
	}
	if err == nil {
		hd := b.w.Header()
		hd.Set(wire.HeaderSnapshotVersion, strconv.Itoa(h.Version))
		hd.Set(wire.HeaderFirstShard, strconv.Itoa(h.FirstShard))
		hd.Set(wire.HeaderLastShard, strconv.Itoa(h.LastShard))
		hd.Set(wire.HeaderAppliedIndex, strconv.FormatUint(h.Applied.Index, 10))
		hd.Set(wire.HeaderAppliedTerm, strconv.FormatUint(h.Applied.Term, 10))
	}
	if err := b.start(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// start sends the status and what was held back.
func (b *backupWriter) start() error {
	hd := b.w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Trailer", wire.TrailerCells+", "+wire.TrailerKVRows+", "+wire.TrailerIndexEntries+", "+wire.TrailerBytes+", "+wire.TrailerSHA256)
	b.w.WriteHeader(http.StatusOK)
	b.started = true
	n, err := b.w.Write(b.head)
	b.n += int64(n)
	b.head = nil
	return err
}

// flush sends what is still held back (a stream shorter than its header cannot be: this is
// for completeness).
func (b *backupWriter) flush() error {
	if b.started {
		return nil
	}
	return b.start()
}

// restorePost restores a partition from the request's body.
func (s *Server) restorePost(w http.ResponseWriter, r *http.Request) error {
	ds, pid, err := s.backupTarget(r)
	if err != nil {
		return err
	}
	opts, he := restoreOptions(r)
	if he != nil {
		return he
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxRestoreBytes)
	res, err := s.b.Backup.Restore(r.Context(), ds, pid, body, opts)
	if err != nil {
		return backupError(err)
	}
	writeJSON(w, http.StatusOK, restoreResult(ds, pid, res))
	return nil
}

// restoreOptions reads the query parameters of a restore: dry_run and force ("true", "false"
// or absent) and accept_lost_cells (a decimal count >= 0), each at most once.
func restoreOptions(r *http.Request) (cluster.RestoreOptions, *httpError) {
	var opts cluster.RestoreOptions
	q := r.URL.Query()
	for _, name := range []string{wire.RestoreDryRunParam, wire.RestoreForceParam, wire.RestoreAcceptLostCellsParam} {
		if len(q[name]) > 1 {
			return opts, invalid(name, "given %d times", len(q[name]))
		}
	}
	for name, dst := range map[string]*bool{wire.RestoreDryRunParam: &opts.DryRun, wire.RestoreForceParam: &opts.Force} {
		switch v := q.Get(name); v {
		case "", "false":
		case "true":
			*dst = true
		default:
			return opts, invalid(name, "%q must be true or false", v)
		}
	}
	if q.Has(wire.RestoreAcceptLostCellsParam) {
		v := q.Get(wire.RestoreAcceptLostCellsParam)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return opts, invalid(wire.RestoreAcceptLostCellsParam, "%q must be a count of cells >= 0 (the cells_lost of a dry run)", v)
		}
		opts.AcceptLostCells = &n
	}
	return opts, nil
}

func restoreResult(ds string, pid int, res cluster.RestoreResult) wire.RestoreResult {
	info := res.Backup
	out := wire.RestoreResult{
		Datastore: ds, Partition: pid, DryRun: res.DryRun, TargetCells: res.TargetCells, CellsLost: res.CellsLost,
		SnapshotVersion: info.Header.Version,
		FirstShard:      info.Header.FirstShard, LastShard: info.Header.LastShard,
		AppliedIndex: info.Header.Applied.Index, AppliedTerm: info.Header.Applied.Term,
		Cells: info.Cells, KVRows: info.KVs, IndexEntries: info.IndexEntries, Bytes: info.Bytes,
		Shards: make([]wire.ShardResult, len(info.Shards)),
	}
	for i, sh := range info.Shards {
		out.Shards[i] = wire.ShardResult{Shard: sh.Shard, MaxAddedID: sh.MaxAddedID, Cells: sh.Cells}
	}
	return out
}
