package fsm

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// groupCommandVersion is the first byte of a consumer-group command entry; cell commands start
// with commandVersion.
const groupCommandVersion byte = 2

// groupKeyPrefix starts the KV keys of every consumer group: "consumer/<group>/<row>".
const groupKeyPrefix = "consumer/"

// GroupCommand is the data of a consumer-group log entry: one command on one group's
// coordinator state, and the leader's clock when it proposed it (the coordinator's "now").
type GroupCommand struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Group     string
	CreatedAt time.Time
	Cmd       consumer.Command
}

// EncodeGroupCommand returns the log entry data of c: a version byte, then MessagePack.
func EncodeGroupCommand(c GroupCommand) ([]byte, error) {
	b, err := msgpack.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode group command: %w", err)
	}
	return append([]byte{groupCommandVersion}, b...), nil
}

// DecodeGroupCommand parses data written by EncodeGroupCommand. Errors wrap ErrBadCommand.
func DecodeGroupCommand(data []byte) (GroupCommand, error) {
	if len(data) == 0 || data[0] != groupCommandVersion {
		return GroupCommand{}, fmt.Errorf("%w: not a group command", ErrBadCommand)
	}
	var c GroupCommand
	if err := msgpack.Unmarshal(data[1:], &c); err != nil {
		return GroupCommand{}, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return c, nil
}

// GroupResponseOf waits for f and returns the group command's result. Errors are raft's own (the
// outcome may be unknown) or the Response's Err (consumer.ErrBadCommand for a command the
// coordinator refused; nothing changed).
func GroupResponseOf(f raft.ApplyFuture) (consumer.Result, error) {
	if err := f.Error(); err != nil {
		return consumer.Result{}, err
	}
	r, ok := f.Response().(*Response)
	if !ok {
		return consumer.Result{}, fmt.Errorf("%w: %T", ErrUnexpectedResponse, f.Response())
	}
	if r.Err != nil {
		return consumer.Result{}, r.Err
	}
	if r.Group == nil {
		return consumer.Result{}, fmt.Errorf("%w: no group result", ErrUnexpectedResponse)
	}
	return *r.Group, nil
}

// groupKey is the KV key of a group's row.
func groupKey(group, row string) string { return groupKeyPrefix + group + "/" + row }

// LoadGroup reads a group's coordinator state from a store's committed KV rows (any replica,
// any goroutine). A group never created loads as an empty group (Exists false).
func LoadGroup(ctx context.Context, st interface {
	ScanKV(ctx context.Context, prefix string) ([]storage.KV, error)
}, group string) (*consumer.Group, error) {
	kvs, err := st.ScanKV(ctx, groupKey(group, ""))
	if err != nil {
		return nil, fmt.Errorf("fsm: load group %s: %w", group, err)
	}
	rows := make(map[string][]byte, len(kvs))
	for _, kv := range kvs {
		rows[strings.TrimPrefix(kv.Key, groupKey(group, ""))] = kv.Value
	}
	g, err := consumer.Load(group, rows)
	if err != nil {
		return nil, fmt.Errorf("fsm: load group %s: %w", group, err)
	}
	return g, nil
}

// GroupNames lists the consumer groups whose coordinator state a store holds, sorted.
func GroupNames(ctx context.Context, st interface {
	ScanKV(ctx context.Context, prefix string) ([]storage.KV, error)
}) ([]string, error) {
	kvs, err := st.ScanKV(ctx, groupKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("fsm: list groups: %w", err)
	}
	seen := map[string]bool{}
	var names []string
	for _, kv := range kvs {
		rest := strings.TrimPrefix(kv.Key, groupKeyPrefix)
		name, _, ok := strings.Cut(rest, "/")
		if ok && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// groupOf returns the FSM's cached state of group, loading it from the store on first use. FSM
// goroutine only.
func (f *FSM) groupOf(ctx context.Context, group string) (*consumer.Group, error) {
	if g, ok := f.groups[group]; ok {
		return g, nil
	}
	g, err := LoadGroup(ctx, f.cfg.Store, group)
	if err != nil {
		return nil, err
	}
	f.groups[group] = g
	return g, nil
}

// applyGroups applies the group entries of a batch to clones of their groups and writes the
// changed rows in tx. It returns the results per entry (nil result and an error value for a
// refused command) and the clones to install once tx commits.
func (f *FSM) applyGroups(ctx context.Context, tx *storage.WriteTx, entries []entry) (map[string]*consumer.Group, error) {
	clones := map[string]*consumer.Group{}
	for i := range entries {
		e := &entries[i]
		if e.group == nil {
			continue
		}
		g, ok := clones[e.group.Group]
		if !ok {
			orig, err := f.groupOf(ctx, e.group.Group)
			if err != nil {
				return nil, err
			}
			g = orig.Clone()
			g.ResetDirty()
			clones[e.group.Group] = g
		}
		res, err := g.Apply(e.group.CreatedAt, e.group.Cmd)
		if err != nil {
			e.groupErr = err
			continue
		}
		e.groupRes = &res
	}
	names := make([]string, 0, len(clones))
	for name := range clones {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		put, del := clones[name].Dirty()
		keys := make([]string, 0, len(put))
		for k := range put {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := tx.PutKV(ctx, groupKey(name, k), put[k]); err != nil {
				return nil, fmt.Errorf("write group %s row %s: %w", name, k, err)
			}
		}
		for _, k := range del {
			if err := tx.DeleteKV(ctx, groupKey(name, k)); err != nil {
				return nil, fmt.Errorf("delete group %s row %s: %w", name, k, err)
			}
		}
	}
	return clones, nil
}
