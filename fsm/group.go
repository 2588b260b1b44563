package fsm

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/storage"
)

// groupKeyPrefix starts the KV keys of every consumer group: "consumer/<group>/<row>".
const groupKeyPrefix = "consumer/"

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
// changed rows in tx. It sets each entry's result (or its error value, for a refused command)
// and returns the clones to install once tx commits.
func (f *FSM) applyGroups(ctx context.Context, tx *storage.WriteTx, entries []groupEntry) (map[string]*consumer.Group, error) {
	clones := map[string]*consumer.Group{}
	for i := range entries {
		e := &entries[i]
		g, ok := clones[e.cmd.Group]
		if !ok {
			orig, err := f.groupOf(ctx, e.cmd.Group)
			if err != nil {
				return nil, err
			}
			g = orig.Clone()
			g.ResetDirty()
			clones[e.cmd.Group] = g
		}
		e.res, e.err = g.Apply(e.cmd.CreatedAt, e.cmd.Cmd)
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
