package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/vmihailenco/msgpack/v5"
)

// Node-to-node RPC: HTTP/1.1 over the transport mux, MessagePack bodies. Status codes carry the
// partition package's error classes so the caller can rebuild them.
const (
	rpcReadPath = "/internal/v1/read"
	// statusNotLeader answers a request sent to a replica that does not lead; the body holds
	// the leader it knows.
	statusNotLeader = http.StatusMisdirectedRequest
	// statusBadCommand answers a command the partition refused (a consumer group's
	// coordinator, an index catalog); errorKindHeader says which refusal.
	statusBadCommand = http.StatusUnprocessableEntity
	maxRPCBody       = 64 << 20
)

// notLeaderRPC names the leader the answering replica knows (id and raft address) and, when
// the answering node hosts no replica, the partition's replicas as it last knew them.
type notLeaderRPC struct {
	LeaderID   string
	LeaderAddr string
	Replicas   []string
}

type readRPC struct {
	TimeoutMicros int64
	Request       readRequest
}

func (n *Node) rpcHandler() http.Handler {
	mux := http.NewServeMux()
	n.leaderRoutes(mux)
	mux.HandleFunc("POST "+rpcReadPath, n.serveRead)
	mux.HandleFunc("POST "+rpcReadIndexPath, n.serveReadIndex)
	mux.HandleFunc("POST "+rpcPrecopyPath, n.servePrecopy)
	n.adminRPCRoutes(mux)
	n.backupRPCRoutes(mux)
	mux.HandleFunc("POST "+catalogFetchPath, n.serveCatalogFetch)
	mux.HandleFunc("POST "+catalogApplyPath, n.serveCatalogApply)
	return mux
}

func decodeRPC(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRPCBody))
	if err != nil {
		return err
	}
	return msgpack.Unmarshal(body, v)
}

func writeRPC(w http.ResponseWriter, status int, v any) {
	b, err := msgpack.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/msgpack")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeRPCError maps an error to the status the forwarding node turns back into it.
func writeRPCError(w http.ResponseWriter, err error) {
	var nl *partition.NotLeaderError
	switch {
	case errors.As(err, &nl):
		ans := notLeaderRPC{LeaderID: nl.LeaderID, LeaderAddr: nl.LeaderAddr}
		var h *notLeaderHint
		if errors.As(err, &h) {
			ans.Replicas = h.replicas
		}
		writeRPC(w, statusNotLeader, ans)
	case errors.Is(err, ErrIndeterminate):
		http.Error(w, err.Error(), http.StatusGatewayTimeout)
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrClosed):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, consumer.ErrBadCommand):
		http.Error(w, err.Error(), statusBadCommand)
	case indexErrorKind(err) != "":
		w.Header().Set(errorKindHeader, indexErrorKind(err))
		http.Error(w, err.Error(), statusBadCommand)
	case errors.Is(err, ErrStillVoter):
		http.Error(w, err.Error(), http.StatusConflict)
	case errors.Is(err, command.ErrShardOutOfRange):
		// Refused for the shard's partition, maybe a split's: the sender re-routes.
		w.Header().Set(errorKindHeader, shardOutOfRangeKind)
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, ErrBadRPC), errors.Is(err, ErrUnknownDatastore), errors.Is(err, ErrBadShard):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// hostedReplica returns the partition pid of ds this node serves when it serves it;
// otherwise it answers the request with the error (not the leader, with the leader this node
// last heard of; or an unknown partition) and returns nil. A partition this node does not know
// (a merge retired it, maybe since the request's route was checked) is refused as out of range,
// nothing applied: the sender re-routes the request by a newer catalog.
func (n *Node) hostedReplica(w http.ResponseWriter, ds string, pid int) Partition {
	rt, err := n.localRoute(ds, pid)
	if errors.Is(err, ErrBadShard) {
		err = fmt.Errorf("%w (%w)", err, command.ErrShardOutOfRange)
	}
	if err != nil {
		writeRPCError(w, err)
		return nil
	}
	p, err := rt.mustLocal()
	if err != nil {
		writeRPCError(w, err)
		return nil
	}
	return p
}

func (n *Node) localRoute(ds string, pid int) (*route, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	for _, r := range d.partitions {
		if r.spec.ID == pid {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%w: no partition %d in %q", ErrBadShard, pid, ds)
}

func (n *Node) serveRead(w http.ResponseWriter, r *http.Request) {
	var req readRPC
	if err := decodeRPC(r, &req); err != nil {
		http.Error(w, "bad read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	rt, err := n.rpcRoute(req.Request.Datastore, req.Request.Partition)
	if err == nil {
		err = validateRead(rt.ds, rt.spec, &req.Request)
	}
	if err != nil {
		refuseRPC(w, "read", err)
		return
	}
	ctx, cancel := rpcContext(r, req.TimeoutMicros)
	defer cancel()
	p := rt.local()
	if p == nil {
		writeRPCError(w, &partition.NotLeaderError{})
		return
	}
	resp, err := p.Read(ctx, req.Request.Consistency, req.Request.Read)
	if err != nil {
		writeRPCError(w, err)
		return
	}
	writeRPC(w, http.StatusOK, resp)
}

// forward sends one RPC to target, in MessagePack, and decodes the answer with decode (a
// failure to decode is an answer lost). For a write, a failure after the request was written
// is ErrIndeterminate; a failure before is ErrUnavailable. The attempt is bounded by
// ForwardTimeout plus wait (a long poll's wait).
func (n *Node) forward(ctx context.Context, target topology.NodeSpec, path string, in any, decode func([]byte) error, write bool, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ForwardTimeout+wait)
	defer cancel()
	body, err := msgpack.Marshal(in)
	if err != nil {
		return fmt.Errorf("cluster: encode rpc: %w", err)
	}
	// wrote is set once the request headers are in the connection's buffer, before any byte of
	// the request can reach the target: net/http calls WroteRequest only after the flush, so a
	// call cancelled in between would see a request the target received as never sent.
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, "http://"+target.RaftAddr+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("cluster: rpc request: %w", err)
	}
	req.Header.Set("Content-Type", "application/msgpack")
	lost := func(err error) error {
		if write && wrote.Load() {
			return fmt.Errorf("%w: forwarded to %s: %w", ErrIndeterminate, target.ID, err)
		}
		return fmt.Errorf("%w: forward to %s: %w", ErrUnavailable, target.ID, err)
	}
	res, err := n.rpcClient.Do(req)
	if err != nil {
		return lost(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxRPCBody))
	if err != nil {
		return lost(err)
	}
	switch res.StatusCode {
	case http.StatusOK:
		if err := decode(data); err != nil {
			return lost(fmt.Errorf("decode answer: %w", err))
		}
		return nil
	case statusNotLeader:
		var nl notLeaderRPC
		_ = msgpack.Unmarshal(data, &nl)
		n.learnAddr(nl.LeaderID, nl.LeaderAddr)
		e := &partition.NotLeaderError{LeaderID: nl.LeaderID, LeaderAddr: nl.LeaderAddr}
		if len(nl.Replicas) > 0 {
			return &notLeaderHint{NotLeaderError: e, replicas: nl.Replicas}
		}
		return e
	case http.StatusServiceUnavailable:
		return fmt.Errorf("%w: %s: %s", ErrUnavailable, target.ID, bytes.TrimSpace(data))
	case http.StatusGatewayTimeout:
		return fmt.Errorf("%w: %s: %s", ErrIndeterminate, target.ID, bytes.TrimSpace(data))
	case http.StatusBadRequest:
		if res.Header.Get(errorKindHeader) == shardOutOfRangeKind {
			return fmt.Errorf("%w (%w): %s", ErrBadShard, command.ErrShardOutOfRange, bytes.TrimSpace(data))
		}
		if bytes.Contains(data, []byte(ErrBadRPC.Error())) {
			return fmt.Errorf("%w (%w): %s", ErrBadShard, ErrBadRPC, bytes.TrimSpace(data))
		}
		return fmt.Errorf("%w: %s", ErrBadShard, bytes.TrimSpace(data))
	case http.StatusConflict:
		// The body is the refusal's own message, which starts with the sentinel's text.
		msg := strings.TrimPrefix(string(bytes.TrimSpace(data)), ErrStillVoter.Error()+": ")
		return fmt.Errorf("%w: %s", ErrStillVoter, msg)
	case statusBadCommand:
		kind := indexErrorOf(res.Header.Get(errorKindHeader))
		if kind == nil {
			kind = consumer.ErrBadCommand
		}
		// The body is the refusal's own message, which starts with the sentinel's text.
		msg := strings.TrimPrefix(string(bytes.TrimSpace(data)), kind.Error()+": ")
		return fmt.Errorf("%w: %s", kind, msg)
	}
	return lost(fmt.Errorf("status %d: %s", res.StatusCode, bytes.TrimSpace(data)))
}

func (n *Node) forwardRead(ctx context.Context, target topology.NodeSpec, req readRequest) (partition.ReadResult, error) {
	var wait time.Duration
	if req.Read.Log != nil {
		wait = req.Read.Log.Wait
	}
	var resp partition.ReadResult
	err := n.forward(ctx, target, rpcReadPath, &readRPC{TimeoutMicros: remainingMicros(ctx, n.cfg.ForwardTimeout+wait), Request: req}, into(&resp), false, wait)
	return resp, err
}

// into returns a decoder of a MessagePack answer into out, for forward.
func into(out any) func([]byte) error {
	return func(data []byte) error { return msgpack.Unmarshal(data, out) }
}

// remainingMicros is the time left before ctx's deadline, capped at max.
func remainingMicros(ctx context.Context, max time.Duration) int64 {
	d := max
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		d = time.Until(dl)
	}
	return d.Microseconds()
}
