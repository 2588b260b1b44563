package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/topology"
)

// A leader operation is a command a node sends to the leader of a partition: a put, an erase,
// an index, schema or consumer-group command. Each is described once (leaderOp: its RPC path,
// the encoding of its request, what the receiving node checks, and the call on the local
// replica); callLeaderOp runs it on the leader, locally or forwarded, with callLeader's
// retries, and serveLeaderOp answers the forwarded request on the leader's node.
//
// On the wire the request is a leaderRPC (an array: version, datastore, partition, time left,
// the command as command.Encode writes it) and the answer to a success is the outcome as
// command.EncodeResult writes it; refusals and errors are the statuses of writeRPCError.

// leaderRPCVersion is the version of the leaderRPC layout.
const leaderRPCVersion = 1

// leaderRPC is the request of every leader operation.
type leaderRPC struct {
	_msgpack      struct{} `msgpack:",as_array"`
	Version       int
	Datastore     string
	Partition     int
	TimeoutMicros int64
	// Command is the operation's request: a command (command.Encode) the receiver decodes and
	// validates before acting.
	Command []byte
}

// leaderOp describes one leader operation whose request is a C and whose outcome is a Res.
type leaderOp[C command.Command, Res command.Result] struct {
	// name names the operation in refusals ("bad put request: ...").
	name string
	// path is the RPC's path.
	path string
	// validate checks a request the receiving node decoded, as the public API checks the
	// request it came from (an error wrapping ErrBadRPC and naming the field, answered 400; or
	// consumer.ErrBadCommand, answered 422), and may clamp it.
	validate func(rt *route, c C) error
	// apply runs the request on the local replica p.
	apply func(ctx context.Context, p Partition, c C) (Res, error)
	// check, when set, checks a forwarded answer against the request; a failure is
	// ErrIndeterminate (the answer was not understood, the command may be applied).
	check func(c C, res Res) error
}

// The leader operations.
var (
	putOp = &leaderOp[*command.Append, command.WriteResult]{
		name: "put",
		path: "/internal/v1/put",
		validate: func(rt *route, a *command.Append) error {
			if len(a.Writes) != 1 {
				return badRPC("command", "%d writes, want 1", len(a.Writes))
			}
			return validateWrite(rt.ds, rt.spec, &a.Writes[0])
		},
		apply: func(ctx context.Context, p Partition, a *command.Append) (command.WriteResult, error) {
			return p.Put(ctx, a.Writes[0])
		},
		check: func(a *command.Append, res command.WriteResult) error {
			if n := len(a.Writes[0].Cells); res.Applied() && len(res.Cells) != n {
				return fmt.Errorf("%d results for %d cells", len(res.Cells), n)
			}
			return nil
		},
	}
	eraseOp = &leaderOp[*command.Erase, command.EraseResult]{
		name: "erase",
		path: "/internal/v1/erase",
		validate: func(rt *route, e *command.Erase) error {
			return checkShard(rt.ds, rt.spec, "row_key", e.RowKey, int(e.Shard))
		},
		apply: func(ctx context.Context, p Partition, e *command.Erase) (command.EraseResult, error) {
			return p.EraseRowFrom(ctx, int(e.Shard), e.RowKey, e.Origin)
		},
	}
	indexOp = &leaderOp[*command.Index, command.IndexResult]{
		name: "index",
		path: "/internal/v1/index",
		validate: func(rt *route, c *command.Index) error {
			return validateIndexCommand(rt.spec, c)
		},
		apply: func(ctx context.Context, p Partition, c *command.Index) (command.IndexResult, error) {
			return p.ApplyIndex(ctx, *c)
		},
	}
	schemaOp = &leaderOp[*command.Schema, command.SchemaResult]{
		name: "schema",
		path: "/internal/v1/schema",
		validate: func(_ *route, c *command.Schema) error {
			return validateSchema(c)
		},
		apply: func(ctx context.Context, p Partition, c *command.Schema) (command.SchemaResult, error) {
			return p.ApplySchema(ctx, *c)
		},
	}
	groupOp = &leaderOp[*command.Group, consumer.Result]{
		name: "group",
		path: "/internal/v1/group",
		validate: func(rt *route, g *command.Group) error {
			if err := validateGroupName(rt.ds, rt.spec, g.Group); err != nil {
				return err
			}
			if err := validateGroup(rt.ds, rt.spec, g.Group, &g.Cmd); err != nil {
				// A command the coordinator would refuse is refused as it would (GroupApply's
				// consumer.ErrBadCommand, 422), wherever it was sent: nothing changed.
				return fmt.Errorf("%w: %w", consumer.ErrBadCommand, err)
			}
			return nil
		},
		apply: func(ctx context.Context, p Partition, g *command.Group) (consumer.Result, error) {
			return p.ApplyGroup(ctx, g.Group, g.Cmd)
		},
	}
)

// leaderRoutes registers the RPC of every leader operation on mux.
func (n *Node) leaderRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+putOp.path, serveLeaderOp(n, putOp))
	mux.HandleFunc("POST "+eraseOp.path, serveLeaderOp(n, eraseOp))
	mux.HandleFunc("POST "+indexOp.path, serveLeaderOp(n, indexOp))
	mux.HandleFunc("POST "+schemaOp.path, serveLeaderOp(n, schemaOp))
	mux.HandleFunc("POST "+groupOp.path, serveLeaderOp(n, groupOp))
	mux.HandleFunc("POST "+splitOp.path, serveLeaderOp(n, splitOp))
	mux.HandleFunc("POST "+freezeOp.path, serveLeaderOp(n, freezeOp))
	mux.HandleFunc("POST "+mergeOp.path, serveLeaderOp(n, mergeOp))
}

// callLeaderOp runs c on the leader of partition r of datastore ds: on the local replica when
// this node leads, else forwarded to the leader's node, following leader hints and retrying as
// callLeader does (every leader operation is a write: once an attempt may have applied, a
// final failure is ErrIndeterminate). Blocks until the leader answered or ctx ends.
func callLeaderOp[C command.Command, Res command.Result](ctx context.Context, n *Node, op *leaderOp[C, Res], ds string, r *route, c C) (Res, error) {
	var res Res
	err := n.callLeader(ctx, r, true,
		func(ctx context.Context) (err error) {
			p, err := r.mustLocal()
			if err != nil {
				return err
			}
			res, err = op.apply(ctx, p, c)
			return err
		},
		func(ctx context.Context, target topology.NodeSpec) (err error) {
			res, err = forwardLeaderOp(ctx, n, op, target, ds, r.spec.ID, c)
			return err
		})
	return res, err
}

// forwardLeaderOp sends c to target, the node believed to lead partition pid of ds, and
// decodes its answer. Errors as forward's.
func forwardLeaderOp[C command.Command, Res command.Result](ctx context.Context, n *Node, op *leaderOp[C, Res], target topology.NodeSpec, ds string, pid int, c C) (Res, error) {
	var res Res
	data, err := command.Encode(c)
	if err != nil {
		return res, err
	}
	req := leaderRPC{Version: leaderRPCVersion, Datastore: ds, Partition: pid, TimeoutMicros: remainingMicros(ctx, n.cfg.ForwardTimeout), Command: data}
	err = n.forward(ctx, target, op.path, &req, func(answer []byte) error {
		var err error
		if res, err = command.DecodeResult[Res](answer); err != nil {
			return err
		}
		if op.check != nil {
			return op.check(c, res)
		}
		return nil
	}, true, 0)
	return res, err
}

// serveLeaderOp returns the handler of op's RPC: it decodes the request, checks that it names
// a partition of a known datastore and that its command is one the public API could have
// sent (op.validate), and runs it on the local replica when this node leads it (else the
// not-leader answer naming the leader it knows).
func serveLeaderOp[C command.Command, Res command.Result](n *Node, op *leaderOp[C, Res]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req leaderRPC
		var c C
		err := decodeRPC(r, &req)
		if err == nil && req.Version != leaderRPCVersion {
			err = badRPC("version", "%d, this node speaks %d", req.Version, leaderRPCVersion)
		}
		var rt *route
		if err == nil {
			rt, err = n.rpcRoute(req.Datastore, req.Partition)
		}
		if err == nil {
			if c, err = command.DecodeAs[C](req.Command); err != nil {
				err = badRPC("command", "%v", err)
			}
		}
		if err == nil {
			err = op.validate(rt, c)
		}
		if err != nil {
			if errors.Is(err, consumer.ErrBadCommand) {
				writeRPCError(w, err)
			} else {
				refuseRPC(w, op.name, err)
			}
			return
		}
		p := n.hostedReplica(w, req.Datastore, req.Partition)
		if p == nil {
			return
		}
		ctx, cancel := rpcContext(r, req.TimeoutMicros)
		defer cancel()
		res, err := op.apply(ctx, p, c)
		if err != nil {
			writeRPCError(w, err)
			return
		}
		answer, err := command.EncodeResult(res)
		if err != nil {
			writeRPCError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/msgpack")
		_, _ = w.Write(answer)
	}
}
