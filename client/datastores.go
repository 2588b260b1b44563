package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/schemaless-db/schemaless/wire"
)

// The catalog calls (/v1/admin/datastores, the split of a partition and the merge of two): the
// datastores of the cluster's replicated catalog, created, dropped and re-partitioned at run
// time. See docs/api.md, "Datastores". They need the admin role.
//
// Retries are those of the admin changes (admin.go): CreateDatastore, DropDatastore,
// SplitPartition and MergePartitions are retried only when they certainly did not start (not
// sent; 503, 429 or 408: the catalog had no leader, nothing was done). A timeout or a
// connection lost after sending, and a 504 (the node ran out of time while the catalog applied
// the change), end the call with ErrIndeterminate: the change may have been applied, and
// Datastores tells. AdminIdempotent does not suit them: a creation sent again after it was
// applied answers ErrConflict, a drop ErrNotFound, a split splits again, a merge is refused
// (its right partition is gone: ErrNotFound).

// CreateDatastore creates datastore req.Name in the cluster's catalog (POST
// /v1/admin/datastores) and returns the catalog generation the creation made, the datastore
// as created (empty when the answering node had not applied the creation yet: Datastores
// shows it), and Ready, whether its partitions had leaders when the node answered (else it
// takes requests once they are elected: DatastoreReady tells). It blocks until then, the
// attempt runs out of Config.AdminTimeout, or ctx is done.
//
// req.Replicas is nil (the cluster's default), an int (a replica count, 1 to 9) or a []string
// of node ids. Errors: ErrInvalidArgument (a field refused; the *APIError's Field names it:
// "name", "shards", "replicas", ...; unsent when req.Name is empty), ErrConflict (a datastore
// of that name exists), ErrUnavailable (the catalog has no leader: nothing done),
// ErrIndeterminate, ErrInternal (also a node without a catalog: 501), ErrBadResponse (also an
// answer about another datastore), or ctx's error.
func (c *Client) CreateDatastore(ctx context.Context, req wire.CreateDatastoreRequest, opts ...AdminOption) (wire.CreateDatastoreResponse, error) {
	const op = "admin_create_datastore"
	if req.Name == "" {
		return wire.CreateDatastoreResponse{}, required(op, "name", "the datastore to create")
	}
	r, err := c.adminRequest(op, http.MethodPost, "/v1/admin/datastores", req, opts)
	if err != nil {
		return wire.CreateDatastoreResponse{}, err
	}
	r.ok = []int{http.StatusCreated}
	ans, err := c.do(ctx, r)
	if err != nil {
		return wire.CreateDatastoreResponse{}, err
	}
	var resp wire.CreateDatastoreResponse
	if err := decode(op, ans, &resp); err != nil {
		return wire.CreateDatastoreResponse{}, err
	}
	// An empty Datastore is an answer of a node that had not applied the creation yet.
	if resp.Datastore.Name != "" && resp.Datastore.Name != req.Name {
		return wire.CreateDatastoreResponse{}, badResponse(op, ans, "datastore %q created, want %q", resp.Datastore.Name, req.Name)
	}
	return resp, nil
}

// Datastores returns the cluster's catalog as the answering node last learned it (GET
// /v1/admin/datastores): its generation and every datastore, with its partitions, replicas
// and latest splits and merges. It is retried as a read. Errors: ErrUnavailable, ErrInternal
// (also a node without a catalog: 501), ErrBadResponse, or ctx's error.
func (c *Client) Datastores(ctx context.Context) (wire.DatastoresResponse, error) {
	const op = "admin_datastores"
	ans, err := c.do(ctx, &request{op: op, method: http.MethodGet, path: "/v1/admin/datastores", ok: []int{http.StatusOK}})
	if err != nil {
		return wire.DatastoresResponse{}, err
	}
	var resp wire.DatastoresResponse
	if err := decode(op, ans, &resp); err != nil {
		return wire.DatastoresResponse{}, err
	}
	if resp.Datastores == nil {
		resp.Datastores = []wire.DatastoreInfo{}
	}
	return resp, nil
}

// DropDatastore drops datastore name from the cluster's catalog (DELETE
// /v1/admin/datastores/{name}?confirm={name}) and returns the catalog generation the drop
// made. Every node then closes the datastore's partitions and deletes their data (a raft
// datastore's; an async datastore's MySQL databases stay). This cannot be undone. It blocks
// until the catalog applied the drop, the attempt runs out of Config.AdminTimeout, or ctx is
// done. Errors: ErrNotFound (no such datastore, field "datastore"), ErrInvalidArgument (unsent
// when name is empty), ErrUnavailable (the catalog has no leader: nothing done),
// ErrIndeterminate, ErrInternal (also a node without a catalog: 501), ErrBadResponse, or ctx's
// error.
func (c *Client) DropDatastore(ctx context.Context, name string, opts ...AdminOption) (wire.DropDatastoreResponse, error) {
	const op = "admin_drop_datastore"
	if name == "" {
		return wire.DropDatastoreResponse{}, required(op, "name", "the datastore to drop")
	}
	r, err := c.adminRequest(op, http.MethodDelete, "/v1/admin/datastores/"+url.PathEscape(name), nil, opts)
	if err != nil {
		return wire.DropDatastoreResponse{}, err
	}
	r.query = url.Values{"confirm": {name}}
	ans, err := c.do(ctx, r)
	if err != nil {
		return wire.DropDatastoreResponse{}, err
	}
	var resp wire.DropDatastoreResponse
	if err := decode(op, ans, &resp); err != nil {
		return wire.DropDatastoreResponse{}, err
	}
	if resp.Dropped != name {
		return wire.DropDatastoreResponse{}, badResponse(op, ans, "datastore %q dropped, want %q", resp.Dropped, name)
	}
	return resp, nil
}

// SetDatastoreSettings changes the settings of raft datastore name that req gives (PATCH
// /v1/admin/datastores/{name}): its leader zone, its split thresholds, each absent field
// unchanged. It returns the catalog generation the change made and the datastore with its new
// settings, and blocks until the answering node applied it, the attempt runs out of
// Config.AdminTimeout, or ctx is done. Errors: ErrInvalidArgument (a field refused, none given,
// or an async datastore; unsent when name is empty), ErrNotFound (no such datastore),
// ErrUnavailable, ErrIndeterminate, ErrInternal, ErrBadResponse (an answer about another
// datastore), or ctx's error.
func (c *Client) SetDatastoreSettings(ctx context.Context, name string, req wire.DatastoreSettingsRequest, opts ...AdminOption) (wire.DatastoreSettingsResponse, error) {
	const op = "admin_datastore_settings"
	if name == "" {
		return wire.DatastoreSettingsResponse{}, required(op, "name", "the datastore to change")
	}
	r, err := c.adminRequest(op, http.MethodPatch, "/v1/admin/datastores/"+url.PathEscape(name), req, opts)
	if err != nil {
		return wire.DatastoreSettingsResponse{}, err
	}
	ans, err := c.do(ctx, r)
	if err != nil {
		return wire.DatastoreSettingsResponse{}, err
	}
	var resp wire.DatastoreSettingsResponse
	if err := decode(op, ans, &resp); err != nil {
		return wire.DatastoreSettingsResponse{}, err
	}
	if resp.Datastore.Name != "" && resp.Datastore.Name != name {
		return wire.DatastoreSettingsResponse{}, badResponse(op, ans, "datastore %q changed, want %q", resp.Datastore.Name, name)
	}
	return resp, nil
}

// SplitPartition splits partition pid of raft datastore ds (POST
// /v1/admin/partitions/{ds}/{pid}/split) at shard atShard, the first shard of the right half
// (0: where its load divides best, else the middle of its range), and returns the catalog generation the split made,
// the Left half (the partition, which keeps its id and the shards below atShard), the Right half
// (a new partition on the same replicas), Ready (whether the right half had a leader on the
// answering node, when that node hosts it) and the split's time. Every acknowledged write
// stays, with its added_id; requests routed by an older catalog are re-routed by the nodes. It
// blocks until the answering node has applied the split, the attempt runs out of
// Config.AdminTimeout, or ctx is done.
//
// It is retried as an admin change (see above): only when it certainly did not start (not
// sent, or 503: the catalog had no leader, nothing done). AdminIdempotent does not suit it: a
// split sent again after it was applied is another split (of the left half's middle when
// atShard is 0; refused, field "at_shard", otherwise). After ErrIndeterminate, Datastores
// tells whether it happened.
//
// Errors: ErrInvalidArgument (at_shard outside the partition's range, or a partition of one
// shard: the *APIError's Field is "at_shard"; an async datastore: "datastore"; a negative pid:
// "partition"; unsent when ds is empty or atShard negative), ErrNotFound (no such datastore,
// Field "datastore", or partition, Field "partition"), ErrConflict (the node's store cannot
// split; or the partition changed while the split was decided: try again),
// ErrUnavailable (the catalog has no leader: nothing done), ErrIndeterminate, ErrInternal
// (also a node without a catalog: 501), ErrBadResponse (also an answer about another
// partition), or ctx's error.
func (c *Client) SplitPartition(ctx context.Context, ds string, pid int, atShard int, opts ...AdminOption) (wire.SplitResponse, error) {
	return c.Split(ctx, ds, pid, wire.SplitRequest{AtShard: atShard}, opts...)
}

// Split is SplitPartition with every field of the request: for an async datastore, req.To
// names a storage cluster the right half then moves to (its answer is the response's Move;
// a failed move leaves the split made and says why in Move.Error), with req.DropOld as
// MoveToCluster's. Errors: SplitPartition's, and ErrInvalidArgument with Field "to" or
// "drop_old" (a raft datastore, or a cluster the datastore does not have).
func (c *Client) Split(ctx context.Context, ds string, pid int, req wire.SplitRequest, opts ...AdminOption) (wire.SplitResponse, error) {
	const op = "admin_split_partition"
	atShard := req.AtShard
	switch {
	case ds == "":
		return wire.SplitResponse{}, required(op, "datastore", "the datastore")
	case atShard < 0:
		return wire.SplitResponse{}, fmt.Errorf("client: %s: %w: at_shard %d is negative (0: where its load divides best, else the middle of its range)", op, ErrInvalidArgument, atShard)
	}
	var resp wire.SplitResponse
	ans, err := c.adminChange(ctx, op, http.MethodPost, partitionPath(ds, pid, "/split"), req, opts, &resp)
	if err != nil {
		return wire.SplitResponse{}, err
	}
	switch {
	case resp.Left.ID != pid:
		return wire.SplitResponse{}, badResponse(op, ans, "left half is partition %d, want %d", resp.Left.ID, pid)
	case resp.Right.ID == pid || resp.Right.FirstShard != resp.Left.LastShard+1 || (atShard > 0 && resp.Right.FirstShard != atShard):
		return wire.SplitResponse{}, badResponse(op, ans, "right half is partition %d from shard %d, after left half %d..%d (at_shard %d)",
			resp.Right.ID, resp.Right.FirstShard, resp.Left.FirstShard, resp.Left.LastShard, atShard)
	}
	return resp, nil
}

// MergePartitions merges partition right of raft datastore ds into partition left (POST
// /v1/admin/partitions/{ds}/merge): right must follow left (its first shard right after left's
// last) and be on the same replicas (move replicas first with MoveReplica). Left keeps its id
// and takes both ranges; right's id is retired. It returns the catalog generation the merge
// made, Merged (partition left as it is now), the merge's time, and PauseMillis, how long
// writes to right's shards waited. Every acknowledged write stays, with its added_id;
// requests routed by an older catalog are re-routed by the nodes. It blocks until the
// answering node has applied the merge, the attempt runs out of Config.AdminTimeout, or ctx
// is done.
//
// It is retried as an admin change (see above): only when it certainly did not start (not
// sent, or 503: the catalog had no leader, or the partitions were unavailable; nothing done).
// AdminIdempotent does not suit it: a merge sent again after it was decided is refused, right
// gone (ErrNotFound, Field "partition"; or ErrInvalidArgument or ErrConflict). After
// ErrIndeterminate, Datastores tells whether it happened.
//
// Errors: ErrInvalidArgument (partitions not adjacent or not on the same replicas: the
// *APIError's Field is "right" or "left"; an async datastore: "datastore"; unsent
// when ds is empty, left or right negative, or left equals right), ErrNotFound (no such
// datastore, Field "datastore", or partition, Field "partition"), ErrConflict (the node's
// store cannot merge, it needs pebble; or the partitions changed while the merge was decided),
// ErrUnavailable (nothing merged), ErrIndeterminate, ErrInternal (also a node without a
// catalog: 501), ErrBadResponse (also an answer about another partition), or ctx's error.
func (c *Client) MergePartitions(ctx context.Context, ds string, left, right int, opts ...AdminOption) (wire.MergeResponse, error) {
	const op = "admin_merge_partitions"
	switch {
	case ds == "":
		return wire.MergeResponse{}, required(op, "datastore", "the raft datastore")
	case left < 0:
		return wire.MergeResponse{}, fmt.Errorf("client: %s: %w: left %d is negative", op, ErrInvalidArgument, left)
	case right < 0:
		return wire.MergeResponse{}, fmt.Errorf("client: %s: %w: right %d is negative", op, ErrInvalidArgument, right)
	case left == right:
		return wire.MergeResponse{}, fmt.Errorf("client: %s: %w: right %d is left too: merge two partitions", op, ErrInvalidArgument, right)
	}
	var resp wire.MergeResponse
	path := "/v1/admin/partitions/" + url.PathEscape(ds) + "/merge"
	ans, err := c.adminChange(ctx, op, http.MethodPost, path, wire.MergeRequest{Left: left, Right: right}, opts, &resp)
	if err != nil {
		return wire.MergeResponse{}, err
	}
	if resp.Merged.ID != left {
		return wire.MergeResponse{}, badResponse(op, ans, "merged partition is %d, want %d", resp.Merged.ID, left)
	}
	return resp, nil
}

// MoveToCluster moves partition pid of async datastore ds to storage cluster req.To, online
// (POST /v1/admin/partitions/{ds}/{pid}/cluster): copy, catch-up from the shard logs, a
// switch under the partition's lock fenced by placement records, drain, and with req.DropOld
// the old copy dropped. Writes keep working; the nodes follow within a probe interval. It
// blocks until the move is done, the attempt runs out of Config.AdminTimeout, or ctx is done;
// it is retried only when it certainly did not start. Sending it again is safe: a finished
// move answers AlreadyThere, an interrupted one is finished (Resumed).
//
// Errors: ErrInvalidArgument (Field "to": missing or not a storage cluster of ds; "datastore":
// a raft datastore), ErrNotFound, ErrConflict (another move of the partition runs),
// ErrUnavailable (rolled back: send it again), ErrIndeterminate, ErrInternal, or ctx's error.
func (c *Client) MoveToCluster(ctx context.Context, ds string, pid int, req wire.ClusterMoveRequest, opts ...AdminOption) (wire.ClusterMoveResponse, error) {
	const op = "admin_move_to_cluster"
	switch {
	case ds == "":
		return wire.ClusterMoveResponse{}, required(op, "datastore", "the async datastore")
	case req.To == "":
		return wire.ClusterMoveResponse{}, required(op, "to", "the storage cluster to move the partition to")
	}
	var resp wire.ClusterMoveResponse
	if _, err := c.adminChange(ctx, op, http.MethodPost, partitionPath(ds, pid, "/cluster"), req, opts, &resp); err != nil {
		return wire.ClusterMoveResponse{}, err
	}
	return resp, nil
}

// MoveCatalogVoters gives the votes of the cluster's catalog (its own raft group, on the
// topology file's first three nodes until moved) to the nodes voters (POST
// /v1/admin/catalog/voters), one membership change at a time: the new voters join and catch
// up, then the old ones leave and delete their replicas. It returns the catalog generation that
// records the voters. It blocks until done, the attempt runs out of Config.AdminTimeout, or ctx
// is done; it is retried only when it certainly did not start, and running it again with the
// same voters is safe (it finishes an interrupted move). Errors: ErrInvalidArgument (Field
// "voters": empty, more than 7, repeated or unknown nodes), ErrUnavailable (the catalog has no
// leader), ErrIndeterminate, ErrInternal, or ctx's error.
func (c *Client) MoveCatalogVoters(ctx context.Context, voters []string, opts ...AdminOption) (wire.CatalogVotersResponse, error) {
	const op = "admin_catalog_voters"
	if len(voters) == 0 {
		return wire.CatalogVotersResponse{}, required(op, "voters", "the ids of the nodes to hold the catalog's votes")
	}
	var resp wire.CatalogVotersResponse
	if _, err := c.adminChange(ctx, op, http.MethodPost, "/v1/admin/catalog/voters", wire.CatalogVotersRequest{Voters: voters}, opts, &resp); err != nil {
		return wire.CatalogVotersResponse{}, err
	}
	return resp, nil
}
