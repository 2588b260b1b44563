package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/schemaless-db/schemaless/wire"
)

// Group operations of GroupCommand.
const (
	GroupHeartbeat = "heartbeat"
	GroupCommit    = "commit"
	GroupLeave     = "leave"
	GroupPark      = "park"
	GroupResolve   = "resolve"
	GroupRetry     = "retry"
	GroupDrop      = "drop"
)

// GroupCommand runs one consumer-group command on the group's coordinator (POST
// /v1/{ds}/groups/{group}/{op}). op is one of the Group* constants; cmd carries its fields (see
// wire.GroupCommand and the triggers package, which is the usual caller). It is retried as a
// write: every group command is safe to repeat (commits are fenced by lease epoch and never
// move an offset backward). Errors: ErrInvalidArgument (a bad field, named), ErrNotFound (no
// such datastore), ErrUnavailable, ErrIndeterminate (it may have been applied), ctx's error.
func (c *Client) GroupCommand(ctx context.Context, group, op string, cmd wire.GroupCommand) (wire.GroupResult, error) {
	name := "group_" + op
	if err := c.checkDatastore(name); err != nil {
		return wire.GroupResult{}, err
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return wire.GroupResult{}, err
	}
	ans, err := c.do(ctx, &request{op: name, method: http.MethodPost, body: body, write: true, ok: []int{http.StatusOK},
		path: c.dsPath("groups", group, op)})
	if err != nil {
		return wire.GroupResult{}, err
	}
	var res wire.GroupResult
	if err := decode(name, ans, &res); err != nil {
		return wire.GroupResult{}, err
	}
	return res, nil
}

// GroupStatus reads a group's members, leases, offsets, lag per shard and parked cells (GET
// /v1/{ds}/groups/{group}). ErrNotFound when no worker ever joined the group.
func (c *Client) GroupStatus(ctx context.Context, group string, opts ...ReadOption) (wire.GroupStatus, error) {
	const op = "group_status"
	if err := c.checkDatastore(op); err != nil {
		return wire.GroupStatus{}, err
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return wire.GroupStatus{}, err
	}
	ans, err := c.do(ctx, &request{op: op, method: http.MethodGet, query: q, ok: []int{http.StatusOK}, path: c.dsPath("groups", group)})
	if err != nil {
		return wire.GroupStatus{}, err
	}
	var st wire.GroupStatus
	if err := decode(op, ans, &st); err != nil {
		return wire.GroupStatus{}, err
	}
	return st, nil
}

// Groups lists the datastore's consumer groups (GET /v1/{ds}/groups), sorted.
func (c *Client) Groups(ctx context.Context, opts ...ReadOption) ([]string, error) {
	const op = "groups"
	if err := c.checkDatastore(op); err != nil {
		return nil, err
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return nil, err
	}
	ans, err := c.do(ctx, &request{op: op, method: http.MethodGet, query: q, ok: []int{http.StatusOK}, path: c.dsPath("groups")})
	if err != nil {
		return nil, err
	}
	var res wire.GroupsResponse
	if err := decode(op, ans, &res); err != nil {
		return nil, err
	}
	return res.Groups, nil
}

// GroupStatuses returns the status of every consumer group of the datastore (Groups, then
// GroupStatus of each, in Groups' order). It fails on the first call that fails, naming the
// group ("group billing: ...").
func (c *Client) GroupStatuses(ctx context.Context, opts ...ReadOption) ([]wire.GroupStatus, error) {
	names, err := c.Groups(ctx, opts...)
	if err != nil {
		return nil, err
	}
	sts := make([]wire.GroupStatus, 0, len(names))
	for _, g := range names {
		st, err := c.GroupStatus(ctx, g, opts...)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g, err)
		}
		sts = append(sts, st)
	}
	return sts, nil
}
