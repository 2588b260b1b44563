package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/schemaless-db/schemaless/wire"
)

// Admin calls (/v1/admin/...): membership and placement of raft partitions. See docs/api.md,
// "Admin endpoints", for what each change does on the cluster.
//
// Retries. The reads (Nodes, Partitions) are retried as every read is. A change is retried
// only when it certainly did not start: its request could not be sent (connection refused,
// dial error), or a node answered 503 unavailable (no leader, leadership moving, the change
// ran out of time: nothing was done, or what was done is completed by sending it again), 429
// or 408. Any other failure ends the call at once, because the change may have started: a
// timeout or a connection lost after sending, and a 504, end with ErrIndeterminate; a 500 with
// ErrInternal; a 4xx with its sentinel (ErrNotFound, ErrConflict, ErrInvalidArgument). A
// caller that knows its change is idempotent (adding a voter already there, removing one
// already gone, a move already done, a transfer to the current leader all answer the
// configuration and change nothing) passes AdminIdempotent to have it retried after those
// failures too, as a cell write is.
//
// Each attempt of a change is bounded by Config.AdminTimeout (31m by default; the node bounds
// the change by its own AdminTimeout, 30m, and answers 503 then); reads by RequestTimeout.

// AdminOption adjusts one admin change.
type AdminOption func(*adminOptions)

type adminOptions struct {
	idempotent bool
	endpoint   *string
}

// AdminIdempotent declares the change safe to send again whatever an earlier attempt did: it
// is then retried, on the next endpoint, after any failure but a 4xx answer (timeouts,
// connections lost after sending, 5xx answers included), and ends with ErrIndeterminate when an
// attempt may have applied it and no later one settled it. Use it for changes whose repetition
// is harmless: AddVoter, RemoveVoter, MoveReplica, and TransferLeader to a named voter.
func AdminIdempotent() AdminOption { return func(o *adminOptions) { o.idempotent = true } }

// AdminEndpoint makes the call store in *ep the base URL of the endpoint its last attempt went
// to (unchanged when it made none). ep must stay valid until the call returns; the call writes
// it from the calling goroutine only.
func AdminEndpoint(ep *string) AdminOption { return func(o *adminOptions) { o.endpoint = ep } }

// adminRequest is a change (a write) with the admin retry policy and timeout.
func (c *Client) adminRequest(op, method, path string, body any, opts []AdminOption) (*request, error) {
	var o adminOptions
	for _, opt := range opts {
		opt(&o)
	}
	r := &request{op: op, method: method, path: path, write: true, policy: retryUnstarted, timeout: c.cfg.AdminTimeout,
		ok: []int{http.StatusOK}, lastEndpoint: o.endpoint}
	if o.idempotent {
		r.policy = retryIdempotent
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: %s: encode request: %w", op, err)
		}
		r.body = b
	}
	return r, nil
}

// adminChange sends the admin change op (adminRequest: method, path and body, JSON-encoded),
// answered 200, and decodes the answer into v. It returns the answer for the caller's checks
// of its content (badResponse), and the errors of adminRequest, do and decode.
func (c *Client) adminChange(ctx context.Context, op, method, path string, body any, opts []AdminOption, v any) (answer, error) {
	r, err := c.adminRequest(op, method, path, body, opts)
	if err != nil {
		return answer{}, err
	}
	ans, err := c.do(ctx, r)
	if err != nil {
		return answer{}, err
	}
	return ans, decode(op, ans, v)
}

// partitionPath returns /v1/admin/partitions/{ds}/{pid} followed by suffix. pid is sent as it
// is: the node answers a negative one 400 invalid_argument, field "partition".
func partitionPath(ds string, pid int, suffix string) string {
	return "/v1/admin/partitions/" + url.PathEscape(ds) + "/" + strconv.Itoa(pid) + suffix
}

// required returns the ErrInvalidArgument error of a call missing a required argument.
func required(op, field, what string) error {
	return fmt.Errorf("client: %s: %w: %s is required (%s)", op, ErrInvalidArgument, field, what)
}

// Nodes returns every node the answering node knows (GET /v1/admin/nodes): its own id and,
// by id, each node's addresses, gossip state, version and the replicas it last gossiped. It is
// retried as a read. Errors: ErrUnavailable, ErrInternal (also a node without admin
// operations: 501), ErrBadResponse, or ctx's error.
func (c *Client) Nodes(ctx context.Context) (wire.NodesResponse, error) {
	const op = "admin_nodes"
	ans, err := c.do(ctx, &request{op: op, method: http.MethodGet, path: "/v1/admin/nodes", ok: []int{http.StatusOK}})
	if err != nil {
		return wire.NodesResponse{}, err
	}
	var resp wire.NodesResponse
	if err := decode(op, ans, &resp); err != nil {
		return wire.NodesResponse{}, err
	}
	return resp, nil
}

// Partitions returns a report per partition of datastore ("" = every datastore) as the
// partitions' leaders and replicas' nodes report them (GET /v1/admin/partitions): the raft
// configuration, each replica's applied index and lag; an async partition its storage cluster
// only. A partition whose leader cannot be found within 3 s is a report with Error set, not an
// error. It is retried as a read. Errors: ErrNotFound (unknown datastore), ErrUnavailable,
// ErrInternal, ErrBadResponse (also a report of another datastore), or ctx's error.
func (c *Client) Partitions(ctx context.Context, datastore string) ([]wire.PartitionReport, error) {
	const op = "admin_partitions"
	r := &request{op: op, method: http.MethodGet, path: "/v1/admin/partitions", ok: []int{http.StatusOK}}
	if datastore != "" {
		r.query = url.Values{"datastore": {datastore}}
	}
	ans, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	var resp wire.PartitionsResponse
	if err := decode(op, ans, &resp); err != nil {
		return nil, err
	}
	for i, p := range resp.Partitions {
		if datastore != "" && p.Datastore != datastore {
			return nil, badResponse(op, ans, "partitions[%d] is of datastore %q, want %q", i, p.Datastore, datastore)
		}
	}
	if resp.Partitions == nil {
		resp.Partitions = []wire.PartitionReport{}
	}
	return resp.Partitions, nil
}

// change sends a partition change and returns the configuration it answers, checked to be
// that of ds/pid.
func (c *Client) change(ctx context.Context, r *request, ds string, pid int) (wire.PartitionConfig, error) {
	ans, err := c.do(ctx, r)
	if err != nil {
		return wire.PartitionConfig{}, err
	}
	var cfg wire.PartitionConfig
	if err := decode(r.op, ans, &cfg); err != nil {
		return wire.PartitionConfig{}, err
	}
	if cfg.Datastore != ds || cfg.Partition != pid {
		return wire.PartitionConfig{}, badResponse(r.op, ans, "configuration of %s/%d, want %s/%d", cfg.Datastore, cfg.Partition, ds, pid)
	}
	return cfg, nil
}

// AddVoter adds node as a voter of partition pid of raft datastore ds (POST
// /v1/admin/partitions/{ds}/{pid}/voters) and returns the partition's configuration then. It
// blocks until the node, added as a nonvoter, has caught up and is promoted (minutes for a large
// partition), the attempt runs out of Config.AdminTimeout, or ctx is done. Adding a voter
// already there changes nothing. Retried as an admin change (see above). Errors: ErrNotFound
// (unknown node, field "node", or datastore), ErrInvalidArgument (bad partition, async
// datastore; unsent when ds or node is empty), ErrUnavailable (no leader; nothing done, or a
// nonvoter left to promote: send it again), ErrIndeterminate, ErrInternal, ErrBadResponse, or
// ctx's error.
func (c *Client) AddVoter(ctx context.Context, ds string, pid int, node string, opts ...AdminOption) (wire.PartitionConfig, error) {
	const op = "admin_add_voter"
	switch {
	case ds == "":
		return wire.PartitionConfig{}, required(op, "datastore", "the raft datastore")
	case node == "":
		return wire.PartitionConfig{}, required(op, "node", "the node to add")
	}
	r, err := c.adminRequest(op, http.MethodPost, partitionPath(ds, pid, "/voters"), wire.NodeRequest{Node: node}, opts)
	if err != nil {
		return wire.PartitionConfig{}, err
	}
	return c.change(ctx, r, ds, pid)
}

// RemoveVoter removes node's replica, voter or nonvoter, from partition pid of raft datastore
// ds (DELETE /v1/admin/partitions/{ds}/{pid}/voters/{node}) and returns the configuration
// without it. A leader is replaced first; once the configuration is committed the node drops
// its data. Removing a node that holds no replica changes nothing. It blocks and is retried
// like AddVoter. Errors as AddVoter's, and ErrConflict (removing the last voter).
func (c *Client) RemoveVoter(ctx context.Context, ds string, pid int, node string, opts ...AdminOption) (wire.PartitionConfig, error) {
	const op = "admin_remove_voter"
	switch {
	case ds == "":
		return wire.PartitionConfig{}, required(op, "datastore", "the raft datastore")
	case node == "":
		return wire.PartitionConfig{}, required(op, "node", "the node to remove")
	}
	r, err := c.adminRequest(op, http.MethodDelete, partitionPath(ds, pid, "/voters/"+url.PathEscape(node)), nil, opts)
	if err != nil {
		return wire.PartitionConfig{}, err
	}
	return c.change(ctx, r, ds, pid)
}

// AddLearner makes node a learner of partition pid of raft datastore ds (POST
// /v1/admin/partitions/{ds}/{pid}/learners): a permanent nonvoter that receives the log and
// serves reads, bounded ones in particular, but never votes. It returns the configuration with
// it. It blocks and is retried like AddVoter. Errors as AddVoter's, and ErrConflict (node is a
// voter).
func (c *Client) AddLearner(ctx context.Context, ds string, pid int, node string, opts ...AdminOption) (wire.PartitionConfig, error) {
	const op = "admin_add_learner"
	switch {
	case ds == "":
		return wire.PartitionConfig{}, required(op, "datastore", "the raft datastore")
	case node == "":
		return wire.PartitionConfig{}, required(op, "node", "the node to hold the learner")
	}
	r, err := c.adminRequest(op, http.MethodPost, partitionPath(ds, pid, "/learners"), wire.NodeRequest{Node: node}, opts)
	if err != nil {
		return wire.PartitionConfig{}, err
	}
	return c.change(ctx, r, ds, pid)
}

// RemoveLearner removes learner node from partition pid of raft datastore ds (DELETE
// /v1/admin/partitions/{ds}/{pid}/learners/{node}); the node drops its data. Removing a node
// that holds no replica changes nothing. Errors as AddVoter's, and ErrConflict (node is a
// voter: RemoveVoter).
func (c *Client) RemoveLearner(ctx context.Context, ds string, pid int, node string, opts ...AdminOption) (wire.PartitionConfig, error) {
	const op = "admin_remove_learner"
	switch {
	case ds == "":
		return wire.PartitionConfig{}, required(op, "datastore", "the raft datastore")
	case node == "":
		return wire.PartitionConfig{}, required(op, "node", "the learner's node")
	}
	r, err := c.adminRequest(op, http.MethodDelete, partitionPath(ds, pid, "/learners/"+url.PathEscape(node)), nil, opts)
	if err != nil {
		return wire.PartitionConfig{}, err
	}
	return c.change(ctx, r, ds, pid)
}

// TransferLeader moves the leadership of partition pid of raft datastore ds to voter to, or,
// when to is "", to the voter raft finds most up to date (POST
// /v1/admin/partitions/{ds}/{pid}/leader), and returns the configuration once another node
// leads. Naming the current leader changes nothing; with to "" every call moves leadership
// again, so it is not idempotent. It blocks and is retried like AddVoter. Errors as
// AddVoter's, and ErrConflict (to is not a voter).
func (c *Client) TransferLeader(ctx context.Context, ds string, pid int, to string, opts ...AdminOption) (wire.PartitionConfig, error) {
	const op = "admin_transfer_leader"
	if ds == "" {
		return wire.PartitionConfig{}, required(op, "datastore", "the raft datastore")
	}
	r, err := c.adminRequest(op, http.MethodPost, partitionPath(ds, pid, "/leader"), wire.NodeRequest{Node: to}, opts)
	if err != nil {
		return wire.PartitionConfig{}, err
	}
	return c.change(ctx, r, ds, pid)
}

// MoveReplica moves the replica of partition pid of raft datastore ds from node from to node
// to (POST /v1/admin/partitions/{ds}/{pid}/move): AddVoter to, then RemoveVoter from, so the
// partition never has fewer voters than before. It returns the final configuration. A move
// already done changes nothing; resending an interrupted one finishes it. It blocks and is
// retried like AddVoter. Errors as AddVoter's, and ErrConflict (from holds no replica, or from
// is to).
func (c *Client) MoveReplica(ctx context.Context, ds string, pid int, from, to string, opts ...AdminOption) (wire.PartitionConfig, error) {
	const op = "admin_move_replica"
	switch {
	case ds == "":
		return wire.PartitionConfig{}, required(op, "datastore", "the raft datastore")
	case from == "" || to == "":
		return wire.PartitionConfig{}, required(op, "from and to", "the nodes to move the replica from and to")
	}
	r, err := c.adminRequest(op, http.MethodPost, partitionPath(ds, pid, "/move"), wire.MoveRequest{From: from, To: to}, opts)
	if err != nil {
		return wire.PartitionConfig{}, err
	}
	return c.change(ctx, r, ds, pid)
}

// Rebalance spreads the voters of every raft partition (of req.Datastore, or of all), then
// their leaderships, evenly over the nodes (POST /v1/admin/rebalance), one replica move at a
// time, and returns what it planned and did. With req.DryRun it plans and changes nothing. It
// blocks until every move is done (each waits for its new replica to catch up), the attempt
// runs out of Config.AdminTimeout, or ctx is done; it is retried as an admin change (an
// interrupted rebalance leaves every partition with at least its voters, and sending it again
// continues it). Errors: ErrNotFound (unknown datastore or node), ErrInvalidArgument,
// ErrUnavailable, ErrIndeterminate, ErrInternal, ErrBadResponse, or ctx's error.
func (c *Client) Rebalance(ctx context.Context, req wire.RebalanceRequest, opts ...AdminOption) (wire.RebalanceReport, error) {
	r, err := c.adminRequest("admin_rebalance", http.MethodPost, "/v1/admin/rebalance", req, opts)
	if err != nil {
		return wire.RebalanceReport{}, err
	}
	return c.rebalance(ctx, r)
}

// Drain moves every raft replica and leadership off node (POST /v1/admin/nodes/{node}/drain):
// a rebalance over the other alive nodes with node excluded. A replica that no other node can
// take stays: the report's ReplicasAfter[node] counts them. With dryRun it plans and changes
// nothing. It blocks, is retried and fails like Rebalance (ErrNotFound, field "node": unknown
// node; ErrInvalidArgument unsent when node is empty).
func (c *Client) Drain(ctx context.Context, node string, dryRun bool, opts ...AdminOption) (wire.RebalanceReport, error) {
	const op = "admin_drain"
	if node == "" {
		return wire.RebalanceReport{}, required(op, "node", "the node to drain")
	}
	r, err := c.adminRequest(op, http.MethodPost, "/v1/admin/nodes/"+url.PathEscape(node)+"/drain", wire.DrainRequest{DryRun: dryRun}, opts)
	if err != nil {
		return wire.RebalanceReport{}, err
	}
	return c.rebalance(ctx, r)
}

func (c *Client) rebalance(ctx context.Context, r *request) (wire.RebalanceReport, error) {
	ans, err := c.do(ctx, r)
	if err != nil {
		return wire.RebalanceReport{}, err
	}
	var rep wire.RebalanceReport
	if err := decode(r.op, ans, &rep); err != nil {
		return wire.RebalanceReport{}, err
	}
	return rep, nil
}
