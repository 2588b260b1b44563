package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/schemaless-db/schemaless/wire"
)

// Backup and restore of one raft partition: the streams of GET /v1/admin/backup/{ds}/{p} and
// POST /v1/admin/restore/{ds}/{p} (docs/api.md, "Backup and restore"). Package backup builds
// whole-datastore backups, with a manifest, on these two calls.

// Backup streams partition pid of raft datastore ds into w (GET /v1/admin/backup/{ds}/{pid}):
// the partition's snapshot stream, taken on its leader after a read index (every write
// acknowledged before the call is in it). It returns the answer's headers and trailers.
//
// It blocks until the stream has been copied into w, or ctx is done: no RequestTimeout applies,
// a stream lasts as long as the partition takes to read; bound it with ctx. Until a node starts
// the stream (answers 200) the call is retried as a read, on the next endpoint; once it has
// started, nothing is retried, since w holds part of it: a broken stream (the node failed, the
// connection was lost; the node then sends no trailers) ends the call with an error wrapping
// ErrUnavailable, an error of w is returned as it is, and w must then be discarded.
//
// When the answer carries its trailers, the stream's length and SHA-256 are checked against
// them (ErrBadResponse on a mismatch). The stream's content is not checked here: fsm.
// VerifySnapshot does that. Errors before the stream: ErrNotFound (unknown datastore or
// partition), ErrInvalidArgument (bad partition; unsent when ds is empty), ErrInternal (an
// async datastore, or a node without backups: 501 unimplemented), ErrUnavailable, or ctx's
// error.
func (c *Client) Backup(ctx context.Context, ds string, pid int, w io.Writer) (wire.BackupInfo, error) {
	const op = "admin_backup"
	if ds == "" {
		return wire.BackupInfo{}, required(op, "datastore", "the raft datastore")
	}
	var info wire.BackupInfo
	var werr error // w's error, returned as it is
	_, err := c.do(ctx, &request{
		op: op, method: http.MethodGet, ok: []int{http.StatusOK}, timeout: -1,
		path: "/v1/admin/backup/" + url.PathEscape(ds) + "/" + strconv.Itoa(pid),
		stream: func(resp *http.Response) error {
			var err error
			if info, err = backupHeaders(resp.Header); err != nil {
				return err
			}
			sum := sha256.New()
			n, err := io.Copy(io.MultiWriter(writerFunc(func(p []byte) (int, error) {
				n, err := w.Write(p)
				if err != nil {
					werr = err
				}
				return n, err
			}), sum), resp.Body)
			if werr != nil {
				return werr
			}
			if err != nil {
				return fmt.Errorf("%w: the stream from %s broke after %d bytes: %w", ErrUnavailable, resp.Request.URL.Host, n, err)
			}
			if err := backupTrailers(resp.Trailer, &info); err != nil {
				return err
			}
			got := hex.EncodeToString(sum.Sum(nil))
			if info.Trailers && (info.Bytes != n || info.SHA256 != got) {
				return fmt.Errorf("%w: %d bytes with SHA-256 %s arrived from %s, which sent %d with %s", ErrBadResponse,
					n, got, resp.Request.URL.Host, info.Bytes, info.SHA256)
			}
			if !info.Trailers {
				info.Bytes, info.SHA256 = n, got
			}
			return nil
		},
	})
	if werr != nil {
		return wire.BackupInfo{}, werr
	}
	if err != nil {
		return wire.BackupInfo{}, err
	}
	return info, nil
}

// writerFunc is an io.Writer calling itself.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// backupHeaders reads the header fields of a backup answer; an absent header leaves its field
// 0 (a node sends them only once the stream's header decoded).
func backupHeaders(h http.Header) (wire.BackupInfo, error) {
	var info wire.BackupInfo
	var errs []error
	atoi := func(name string, dst *int) {
		if v := h.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: header %s %q", ErrBadResponse, name, v))
			}
			*dst = n
		}
	}
	atou := func(name string, dst *uint64) {
		if v := h.Get(name); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: header %s %q", ErrBadResponse, name, v))
			}
			*dst = n
		}
	}
	atoi(wire.HeaderSnapshotVersion, &info.SnapshotVersion)
	atoi(wire.HeaderFirstShard, &info.FirstShard)
	atoi(wire.HeaderLastShard, &info.LastShard)
	atou(wire.HeaderAppliedIndex, &info.AppliedIndex)
	atou(wire.HeaderAppliedTerm, &info.AppliedTerm)
	return info, errors.Join(errs...)
}

// backupTrailers reads the trailers of a backup answer into info; Trailers stays false when
// the answer has no SHA-256 trailer.
func backupTrailers(t http.Header, info *wire.BackupInfo) error {
	info.SHA256 = t.Get(wire.TrailerSHA256)
	if info.SHA256 == "" {
		return nil
	}
	info.Trailers = true
	var errs []error
	for name, dst := range map[string]*int64{wire.TrailerCells: &info.Cells, wire.TrailerKVRows: &info.KVRows,
		wire.TrailerIndexEntries: &info.IndexEntries, wire.TrailerBytes: &info.Bytes} {
		n, err := strconv.ParseInt(t.Get(name), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: trailer %s %q", ErrBadResponse, name, t.Get(name)))
		}
		*dst = n
	}
	return errors.Join(errs...)
}

// RestoreOptions shape a Restore. The node compares the partition's cells with the backup's by
// key (shard, row key, column key, ref key); CellsLost (wire.RestoreResult) counts the
// partition's cells the backup lacks, which a restore drops.
type RestoreOptions struct {
	// DryRun checks the backup and compares it with the partition without changing anything
	// (?dry_run=true): the result has DryRun true, TargetCells and CellsLost.
	DryRun bool
	// Force replaces a partition that holds cells when all of them are in the backup
	// (CellsLost 0). It never drops cells: with CellsLost > 0 the node refuses (ErrConflict)
	// unless AcceptLostCells names the count.
	Force bool
	// AcceptLostCells, when not nil, is the CellsLost the caller accepts (from a dry run):
	// the node restores only if its count, made just before it replaces the partition,
	// equals it; otherwise it refuses (ErrConflict, an *APIError with Field
	// "accept_lost_cells" whose Message names the count) and changes nothing. It allows
	// replacing a partition that holds cells, as Force does. Negative is refused unsent.
	AcceptLostCells *int64
}

// Restore replaces the whole state of partition pid of raft datastore ds (cells, consumer
// groups, index catalog and tables) with a backup stream of size bytes read from src (POST
// /v1/admin/restore/{ds}/{pid}[?dry_run=true][&force=true][&accept_lost_cells=N]), on every
// replica, and returns the backup as the partition's leader read it with the cells it replaced
// (TargetCells) and dropped (CellsLost). With opts.DryRun it changes nothing and returns what a
// restore would do. src is read from offset 0 on each attempt, concurrently with
// nothing else of the call; an *os.File of the backup does.
//
// It blocks until a quorum holds the restored state, or ctx is done: no RequestTimeout applies.
// It is retried as an admin change that must not run twice by accident: only when it certainly
// did not start (not sent; 503, 429, 408 answers). Errors: ErrConflict (the partition holds
// cells and neither Force nor AcceptLostCells is set, or it holds cells absent from the backup
// and AcceptLostCells is not their number; nothing changed), ErrInvalidArgument (a malformed stream or one of
// another shard range, field "body"; unsent when ds is empty or size negative), ErrTooLarge
// (beyond the node's MaxRestoreBytes), ErrNotFound, ErrInternal (an async datastore: 501),
// ErrUnavailable (nothing changed), ErrIndeterminate (a 504, a timeout or a connection lost
// after sending: the restore may have taken effect; check the partition with a dry run and
// restore again), ErrBadResponse, or ctx's error.
func (c *Client) Restore(ctx context.Context, ds string, pid int, src io.ReaderAt, size int64, opts RestoreOptions) (wire.RestoreResult, error) {
	const op = "admin_restore"
	if ds == "" {
		return wire.RestoreResult{}, required(op, "datastore", "the raft datastore")
	}
	if size < 0 {
		return wire.RestoreResult{}, fmt.Errorf("client: %s: %w: size %d is negative", op, ErrInvalidArgument, size)
	}
	if opts.AcceptLostCells != nil && *opts.AcceptLostCells < 0 {
		return wire.RestoreResult{}, fmt.Errorf("client: %s: %w: accept_lost_cells %d is negative", op, ErrInvalidArgument, *opts.AcceptLostCells)
	}
	r := &request{
		op: op, method: http.MethodPost, write: true, policy: retryUnstarted, timeout: -1, ok: []int{http.StatusOK},
		path:    "/v1/admin/restore/" + url.PathEscape(ds) + "/" + strconv.Itoa(pid),
		newBody: func() io.Reader { return io.NewSectionReader(src, 0, size) }, contentLength: size,
		contentType: "application/octet-stream",
	}
	r.query = url.Values{}
	if opts.DryRun {
		r.query.Set(wire.RestoreDryRunParam, "true")
	}
	if opts.Force {
		r.query.Set(wire.RestoreForceParam, "true")
	}
	if opts.AcceptLostCells != nil {
		r.query.Set(wire.RestoreAcceptLostCellsParam, strconv.FormatInt(*opts.AcceptLostCells, 10))
	}
	ans, err := c.do(ctx, r)
	if err != nil {
		return wire.RestoreResult{}, err
	}
	var res wire.RestoreResult
	if err := decode(op, ans, &res); err != nil {
		return wire.RestoreResult{}, err
	}
	if res.Datastore != ds || res.Partition != pid || res.DryRun != opts.DryRun {
		return wire.RestoreResult{}, badResponse(op, ans, "restore of %s/%d (dry run %t), want %s/%d (dry run %t)", res.Datastore, res.Partition, res.DryRun, ds, pid, opts.DryRun)
	}
	return res, nil
}
