package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/vmihailenco/msgpack/v5"
)

// Backup and restore of raft-mode partitions. Both run on the partition's leader; a node that
// does not lead streams through a node-to-node RPC to the one that does (GET rpcBackupPath
// answers the snapshot stream as its body; POST rpcRestorePath takes it as its body), so a
// partition is never held in memory. Leader hints are followed like every leader-only call,
// but only until the first byte of the stream moved: after that a failure is final.

const (
	rpcBackupPath  = "/internal/v1/backup"
	rpcRestorePath = "/internal/v1/restore"
	// statusBadBackup answers a restore whose stream is malformed (fsm.ErrBadSnapshot).
	statusBadBackup = http.StatusUnprocessableEntity
	// statusNotEmpty answers a restore without force into a partition holding cells.
	statusNotEmpty = http.StatusConflict
	// statusCellsLost answers a restore refused with a *partition.CellsLostError; its body is
	// the error in MessagePack (cellsLostRPC).
	statusCellsLost = http.StatusPreconditionFailed
)

// Query parameters of the restore RPC (besides datastore and partition), as the public API's:
// "true" or "false" (absent: false) for the flags, a decimal count >= 0 for
// rpcAcceptLostCells.
const (
	rpcForce           = "force"
	rpcDryRun          = "dry_run"
	rpcAcceptLostCells = "accept_lost_cells"
)

// cellsLostRPC carries a *partition.CellsLostError over the restore RPC.
type cellsLostRPC struct {
	Lost     int64
	Accepted *int64
}

// ErrStreamBroken: a backup stream failed after bytes of it were written; what was written is a
// truncated stream, which fsm.VerifySnapshot and restores reject. Retrying means starting a new
// backup.
var ErrStreamBroken = errors.New("cluster: backup stream broken after it started")

// BackupInfo describes one backup stream: its header, its record counts, its cells per shard
// and its length (fsm.BackupInfo).
type BackupInfo = fsm.BackupInfo

// SnapshotHeader opens a backup stream: format version, shard range, and the applied raft
// index and term of the state it holds (fsm.SnapshotHeader).
type SnapshotHeader = fsm.SnapshotHeader

// RestoreOptions tune Restore (partition.RestoreOptions): DryRun compares without changing
// anything; Force replaces a partition whose cells are all in the backup; AcceptLostCells
// names how many of the partition's cells absent from the backup may be dropped.
type RestoreOptions = partition.RestoreOptions

// RestoreResult is the outcome of Restore (partition.RestoreResult): the backup read, the
// cells the partition held and those of them absent from the backup (lost).
type RestoreResult = partition.RestoreResult

// CellsLostError is Restore's refusal when the partition's cells absent from the backup are
// not the number accepted (partition.CellsLostError); it unwraps to ErrCellsLost.
type CellsLostError = partition.CellsLostError

// ReadSnapshotHeader reads the header of a backup stream from r (fsm.ReadSnapshotHeader),
// leaving r after it when r is an io.ByteScanner. Errors: ErrBadSnapshot, r's.
func ReadSnapshotHeader(r io.Reader) (SnapshotHeader, error) { return fsm.ReadSnapshotHeader(r) }

// Backup writes a consistent backup of partition pid of datastore ds to w (the snapshot stream
// of partition.Raft.Backup: it holds every write acknowledged before Backup was called) and
// returns what it wrote. It runs on the partition's leader: here, or on the leader's node with
// the stream relayed to w as it arrives (and checked on the way, fsm.VerifySnapshot).
//
// It blocks until the whole stream is written or ctx ends, retrying with backoff while no
// leader answers, as long as nothing was written to w and for at most 3 × ForwardTimeout.
// Errors: ErrUnknownDatastore, ErrBadShard (no partition pid), ErrAsyncDatastore (async
// datastores are backed up with MySQL's tools on their storage clusters),
// ErrUnavailable (nothing written), ErrStreamBroken (wrapped, with the cause: w holds
// a truncated stream; with fsm.ErrBadSnapshot when the relayed stream did not check out).
func (n *Node) Backup(ctx context.Context, ds string, pid int, w io.Writer) (fsm.BackupInfo, error) {
	r, err := n.localRoute(ds, pid)
	if err != nil {
		return fsm.BackupInfo{}, err
	}
	cw := &streamWriter{w: w}
	var info fsm.BackupInfo
	ctx, cancel := n.boundStart(ctx, func() bool { return cw.n.Load() > 0 })
	defer cancel()
	err = n.callLeader(ctx, r, false,
		func(ctx context.Context) error {
			p, err := r.mustLocal()
			if err != nil {
				return err
			}
			info, err = p.Backup(ctx, cw)
			return startedError(cw.n.Load() > 0, err)
		},
		func(ctx context.Context, target topology.NodeSpec) (err error) {
			info, err = n.forwardBackup(ctx, target, ds, pid, cw)
			return startedError(cw.n.Load() > 0, err)
		})
	var se *startedErr
	if errors.As(err, &se) {
		if errors.Is(se.err, fsm.ErrBadSnapshot) {
			return info, fmt.Errorf("%w after %d bytes: %w", ErrStreamBroken, cw.n.Load(), se.err)
		}
		return info, fmt.Errorf("%w after %d bytes: %w", ErrStreamBroken, cw.n.Load(), se.err)
	}
	return info, err
}

// Restore replaces the whole state of partition pid of datastore ds, on every replica, with the
// backup stream read from r (partition.Raft.RestoreBackup, whose documentation says what
// happens to writes meanwhile and why the restored applied index differs from the backup's).
// It runs on the partition's leader: here, or on the leader's node with r streamed to it. It
// returns the backup's BackupInfo (its header names the source cluster's applied index) and
// the comparison of the partition's cells with the backup's (RestoreResult). With
// opts.DryRun it changes nothing and returns that comparison.
//
// It blocks until the restore is committed by a quorum, or fails, or ctx ends; it retries while
// no leader answers only as long as nothing was read from r, and for at most 3 × ForwardTimeout.
// Errors: ErrUnknownDatastore, ErrBadShard, ErrAsyncDatastore, ErrNotEmpty (the partition
// holds cells, all in the backup, and neither opts.Force nor opts.AcceptLostCells is given),
// *CellsLostError (ErrCellsLost: cells absent from the backup, not the number
// opts.AcceptLostCells names; nothing changed), ErrBadRPC (a negative opts.AcceptLostCells,
// or a leader refusing the forwarded parameters), fsm.ErrBadSnapshot (the stream is malformed,
// truncated or of another shard range: nothing changed), ErrUnavailable (nothing
// changed; retry with a new stream), ErrIndeterminate (the restore may or may not
// have taken effect), r's read error (wrapped).
func (n *Node) Restore(ctx context.Context, ds string, pid int, r io.Reader, opts partition.RestoreOptions) (RestoreResult, error) {
	rt, err := n.localRoute(ds, pid)
	if err != nil {
		return RestoreResult{}, err
	}
	if opts.AcceptLostCells != nil && *opts.AcceptLostCells < 0 {
		return RestoreResult{}, fmt.Errorf("%w: accept_lost_cells %d is negative", ErrBadRPC, *opts.AcceptLostCells)
	}
	cr := &streamReader{r: r}
	var info RestoreResult
	ctx, cancel := n.boundStart(ctx, func() bool { return cr.n.Load() > 0 })
	defer cancel()
	err = n.callLeader(ctx, rt, false,
		func(ctx context.Context) error {
			p, err := rt.mustLocal()
			if err != nil {
				return err
			}
			info, err = p.RestoreBackup(ctx, cr, opts)
			return startedError(cr.n.Load() > 0, err)
		},
		func(ctx context.Context, target topology.NodeSpec) (err error) {
			info, err = n.forwardRestore(ctx, target, ds, pid, cr, opts)
			return startedError(cr.n.Load() > 0, err)
		})
	var se *startedErr
	if errors.As(err, &se) {
		err = se.err
		var nl *partition.NotLeaderError
		if errors.As(err, &nl) {
			err = asClass(ErrUnavailable, "leadership moved while the backup was sent", err)
		}
	}
	if rerr := cr.readErr(); err != nil && rerr != nil && !errors.Is(rerr, io.EOF) {
		// The source failed (a client gone, a body over its limit): that is the cause.
		return info, fmt.Errorf("cluster: restore: reading the backup: %w", rerr)
	}
	return info, err
}

// boundStart returns a context that ends with ctx, or after 3 × ForwardTimeout if moved still
// reports false then: while no leader answers, a stream's request fails (unavailable) rather
// than waiting as long as the stream itself may last.
func (n *Node) boundStart(ctx context.Context, moved func() bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(3*n.cfg.ForwardTimeout, func() {
		if !moved() {
			cancel(fmt.Errorf("%w: no leader started the stream within %v", ErrUnavailable, 3*n.cfg.ForwardTimeout))
		}
	})
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// startedErr is the failure of an attempt that had already moved bytes of its stream: callLeader
// returns it as it is (it matches none of the errors it retries), and the caller unwraps it.
type startedErr struct{ err error }

func (e *startedErr) Error() string { return e.err.Error() }

func startedError(started bool, err error) error {
	if err == nil || !started {
		return err
	}
	return &startedErr{err}
}

// streamWriter counts the bytes written to w (atomically: an abandoned attempt's goroutine may
// still write while the caller looks).
type streamWriter struct {
	w io.Writer
	n atomic.Int64
}

func (s *streamWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n.Add(int64(n))
	return n, err
}

// streamReader counts the bytes read from r and keeps r's first error.
type streamReader struct {
	r   io.Reader
	n   atomic.Int64
	mu  sync.Mutex
	err error
}

func (s *streamReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n.Add(int64(n))
	if err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
	return n, err
}

// readErr returns r's first error (nil while it had none).
func (s *streamReader) readErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// attemptBody is the body of one forwarded restore: once the attempt is over (end), reads fail,
// so that the HTTP transport, which may still read a request's body after Do returned, never
// reads on behalf of an attempt that is over. end waits for a read under way.
type attemptBody struct {
	mu    sync.Mutex
	r     io.Reader
	ended bool
}

func (a *attemptBody) Read(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		return 0, errors.New("cluster: restore attempt is over")
	}
	return a.r.Read(p)
}

func (a *attemptBody) Close() error { return nil }

func (a *attemptBody) end() {
	a.mu.Lock()
	a.ended = true
	a.mu.Unlock()
}

// streamClient is the node-to-node HTTP client without the whole-request timeout of rpcClient:
// a stream lasts as long as the partition takes to read. ctx bounds it.
func (n *Node) streamClient() *http.Client {
	return &http.Client{Transport: n.rpcClient.Transport}
}

func backupQuery(path, target, ds string, pid int, opts partition.RestoreOptions) string {
	q := url.Values{"datastore": {ds}, "partition": {strconv.Itoa(pid)}}
	if opts.Force {
		q.Set(rpcForce, "true")
	}
	if opts.DryRun {
		q.Set(rpcDryRun, "true")
	}
	if opts.AcceptLostCells != nil {
		q.Set(rpcAcceptLostCells, strconv.FormatInt(*opts.AcceptLostCells, 10))
	}
	return "http://" + target + path + "?" + q.Encode()
}

// forwardBackup asks target for the backup and relays it to w, checking it on the way. Until the
// answer's header arrives the attempt is bounded by ForwardTimeout.
func (n *Node) forwardBackup(ctx context.Context, target topology.NodeSpec, ds string, pid int, w io.Writer) (fsm.BackupInfo, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(n.cfg.ForwardTimeout, cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, backupQuery(rpcBackupPath, target.RaftAddr, ds, pid, partition.RestoreOptions{}), nil)
	if err != nil {
		return fsm.BackupInfo{}, fmt.Errorf("cluster: rpc request: %w", err)
	}
	res, err := n.streamClient().Do(req)
	if !timer.Stop() {
		// The header phase timed out: whatever arrived, nothing was relayed yet.
		if err == nil {
			res.Body.Close()
		}
		return fsm.BackupInfo{}, fmt.Errorf("%w: backup from %s: no answer within %v", ErrUnavailable, target.ID, n.cfg.ForwardTimeout)
	}
	if err != nil {
		return fsm.BackupInfo{}, fmt.Errorf("%w: backup from %s: %w", ErrUnavailable, target.ID, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fsm.BackupInfo{}, streamAnswerError(target, res)
	}
	info, err := fsm.VerifySnapshot(io.TeeReader(res.Body, w))
	if err != nil {
		return info, fmt.Errorf("cluster: backup from %s: %w", target.ID, err)
	}
	return info, nil
}

// forwardRestore sends the backup read from r to target. The request asks for 100-continue, so
// a node that refuses at once (not the leader, not empty) does so before r is read.
func (n *Node) forwardRestore(ctx context.Context, target topology.NodeSpec, ds string, pid int, r io.Reader, opts partition.RestoreOptions) (RestoreResult, error) {
	body := &attemptBody{r: r}
	defer body.end()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, backupQuery(rpcRestorePath, target.RaftAddr, ds, pid, opts), body)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("cluster: rpc request: %w", err)
	}
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Expect", "100-continue")
	res, err := n.streamClient().Do(req)
	if err != nil {
		// Sent in full or not, the restore's outcome is unknown once the leader may have read
		// the whole stream; Restore reports a failure before that as unavailable.
		return RestoreResult{}, fmt.Errorf("%w: restore on %s: %w", ErrIndeterminate, target.ID, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return RestoreResult{}, streamAnswerError(target, res)
	}
	var info RestoreResult
	data, err := io.ReadAll(io.LimitReader(res.Body, maxRPCBody))
	if err == nil {
		err = msgpack.Unmarshal(data, &info)
	}
	if err != nil {
		return info, fmt.Errorf("%w: restore on %s: reading the answer: %w", ErrIndeterminate, target.ID, err)
	}
	return info, nil
}

// streamAnswerError rebuilds the error of a backup or restore RPC answered with status other
// than 200.
func streamAnswerError(target topology.NodeSpec, res *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	msg := string(bytes.TrimSpace(data))
	switch res.StatusCode {
	case statusNotLeader:
		var nl notLeaderRPC
		_ = msgpack.Unmarshal(data, &nl)
		return &partition.NotLeaderError{LeaderID: nl.LeaderID}
	case http.StatusServiceUnavailable:
		return fmt.Errorf("%w: %s: %s", ErrUnavailable, target.ID, msg)
	case http.StatusGatewayTimeout:
		return fmt.Errorf("%w: %s: %s", ErrIndeterminate, target.ID, msg)
	case http.StatusBadRequest:
		if rest, ok := strings.CutPrefix(msg, ErrBadRPC.Error()+": "); ok {
			return fmt.Errorf("%w: %s: %s", ErrBadRPC, target.ID, rest)
		}
		return fmt.Errorf("%w: %s", ErrBadShard, msg)
	case statusCellsLost:
		var cl cellsLostRPC
		if err := msgpack.Unmarshal(data, &cl); err != nil {
			return fmt.Errorf("cluster: %s answered %d with a malformed body: %w", target.ID, res.StatusCode, err)
		}
		return &partition.CellsLostError{Lost: cl.Lost, Accepted: cl.Accepted}
	case statusBadBackup:
		return fmt.Errorf("%w: %s", fsm.ErrBadSnapshot, strings.TrimPrefix(msg, fsm.ErrBadSnapshot.Error()+": "))
	case statusNotEmpty:
		return fmt.Errorf("%w: %s", partition.ErrNotEmpty, strings.TrimPrefix(msg, partition.ErrNotEmpty.Error()+": "))
	}
	return fmt.Errorf("cluster: %s answered %d: %s", target.ID, res.StatusCode, msg)
}

// writeBackupRPCError answers a backup or restore RPC with err.
func writeBackupRPCError(w http.ResponseWriter, err error) {
	var cl *partition.CellsLostError
	switch {
	case errors.As(err, &cl):
		writeRPC(w, statusCellsLost, cellsLostRPC{Lost: cl.Lost, Accepted: cl.Accepted})
	case errors.Is(err, ErrBadRPC):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, fsm.ErrBadSnapshot):
		http.Error(w, err.Error(), statusBadBackup)
	case errors.Is(err, partition.ErrNotEmpty):
		http.Error(w, err.Error(), statusNotEmpty)
	default:
		writeRPCError(w, err)
	}
}

// backupRPCRoutes registers the node-to-node endpoints of backup and restore.
func (n *Node) backupRPCRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+rpcBackupPath, n.serveBackup)
	mux.HandleFunc("POST "+rpcRestorePath, n.serveRestore)
}

// rpcPartition reads the datastore and partition of a backup or restore RPC.
func rpcPartition(w http.ResponseWriter, r *http.Request) (string, int, bool) {
	ds := r.URL.Query().Get("datastore")
	pid, err := strconv.Atoi(r.URL.Query().Get("partition"))
	if err != nil {
		http.Error(w, "bad partition: "+err.Error(), http.StatusBadRequest)
		return "", 0, false
	}
	return ds, pid, true
}

func (n *Node) serveBackup(w http.ResponseWriter, r *http.Request) {
	ds, pid, ok := rpcPartition(w, r)
	if !ok {
		return
	}
	p := n.hostedReplica(w, ds, pid)
	if p == nil {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	sw := &streamWriter{w: w}
	if _, err := p.Backup(r.Context(), sw); err != nil {
		if sw.n.Load() == 0 {
			writeBackupRPCError(w, err)
			return
		}
		// The status is sent: break the connection, so the relay sees a truncated stream
		// rather than a clean end.
		n.log.Warn("backup stream broken", "datastore", ds, "partition", pid, "bytes", sw.n.Load(), "error", err)
		panic(http.ErrAbortHandler)
	}
}

func (n *Node) serveRestore(w http.ResponseWriter, r *http.Request) {
	ds, pid, opts, err := n.validateRestoreRPC(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p := n.hostedReplica(w, ds, pid)
	if p == nil {
		return
	}
	info, err := p.RestoreBackup(r.Context(), r.Body, opts)
	if err != nil {
		writeBackupRPCError(w, err)
		return
	}
	writeRPC(w, http.StatusOK, info)
}

// validateRestoreRPC checks the query of a restore RPC as the public API checks a restore's: a
// datastore this node knows, a partition of it, and well-formed options (force and dry_run
// "true", "false" or absent; accept_lost_cells a decimal count >= 0 or absent; no other
// parameter). The first problem is returned, wrapping ErrBadRPC and naming the parameter.
func (n *Node) validateRestoreRPC(q url.Values) (string, int, partition.RestoreOptions, error) {
	var opts partition.RestoreOptions
	for k, v := range q {
		if len(v) != 1 {
			return "", 0, opts, fmt.Errorf("%w: restore: parameter %s given %d times", ErrBadRPC, k, len(v))
		}
		switch k {
		case "datastore", "partition", rpcForce, rpcDryRun, rpcAcceptLostCells:
		default:
			return "", 0, opts, fmt.Errorf("%w: restore: unknown parameter %s", ErrBadRPC, k)
		}
	}
	ds := q.Get("datastore")
	spec, err := n.Datastore(ds)
	if err != nil {
		return "", 0, opts, fmt.Errorf("%w: restore: datastore: %w", ErrBadRPC, err)
	}
	text := q.Get("partition")
	pid, err := strconv.Atoi(text)
	if err != nil {
		return "", 0, opts, fmt.Errorf("%w: restore: partition %q is not a partition id", ErrBadRPC, text)
	}
	if !slices.ContainsFunc(spec.Partitions, func(p topology.PartitionSpec) bool { return p.ID == pid }) {
		return "", 0, opts, fmt.Errorf("%w: restore: datastore %s has no partition %d", ErrBadRPC, ds, pid)
	}
	flag := func(name string, dst *bool) error {
		switch v := q.Get(name); v {
		case "", "false":
		case "true":
			*dst = true
		default:
			return fmt.Errorf("%w: restore: %s %q must be true or false", ErrBadRPC, name, v)
		}
		return nil
	}
	if err := flag(rpcForce, &opts.Force); err != nil {
		return "", 0, opts, err
	}
	if err := flag(rpcDryRun, &opts.DryRun); err != nil {
		return "", 0, opts, err
	}
	if q.Has(rpcAcceptLostCells) {
		v := q.Get(rpcAcceptLostCells)
		nlost, err := strconv.ParseInt(v, 10, 64)
		if err != nil || nlost < 0 {
			return "", 0, opts, fmt.Errorf("%w: restore: %s %q must be a count of cells >= 0", ErrBadRPC, rpcAcceptLostCells, v)
		}
		opts.AcceptLostCells = &nlost
	}
	return ds, pid, opts, nil
}
