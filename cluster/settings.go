package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// SetDatastoreSettings changes the settings of raft datastore name that req gives (its leader
// zone, its split thresholds), keeping the others, through the catalog (OpSettings), and
// returns once this node applied the change; every node then serves the datastore with them.
// Two changes at once: the later one's settings win whole. Errors: *FieldError (a field
// refused, or none given), ErrUnknownDatastore, ErrNoCatalog, ErrIndeterminate, ctx's error.
func (n *Node) SetDatastoreSettings(ctx context.Context, name string, req wire.DatastoreSettingsRequest) (wire.DatastoreSettingsResponse, error) {
	c := n.cat.cur.Load()
	if c == nil {
		return wire.DatastoreSettingsResponse{}, ErrNoCatalog
	}
	d := c.Datastores[name]
	if d == nil {
		return wire.DatastoreSettingsResponse{}, fmt.Errorf("%w: %q", ErrUnknownDatastore, name)
	}
	spec, err := specOf(d)
	if err != nil {
		return wire.DatastoreSettingsResponse{}, err
	}
	if req.LeaderZone == nil && req.SplitLoad == nil && req.SplitSize == nil {
		return wire.DatastoreSettingsResponse{}, &FieldError{Field: "settings", Msg: "give leader_zone, split_load or split_size"}
	}
	if spec.Mode != topology.ModeRaft {
		return wire.DatastoreSettingsResponse{}, &FieldError{Field: "datastore", Msg: fmt.Sprintf("%s is an async datastore: leader zones and split thresholds are for raft datastores", name)}
	}
	if req.LeaderZone != nil {
		if *req.LeaderZone != "" && !topology.ZonePattern.MatchString(*req.LeaderZone) {
			return wire.DatastoreSettingsResponse{}, &FieldError{Field: "leader_zone", Msg: fmt.Sprintf("%q must match %s (\"\" clears it)", *req.LeaderZone, topology.ZonePattern)}
		}
		spec.LeaderZone = *req.LeaderZone
	}
	if req.SplitLoad != nil {
		if math.IsNaN(*req.SplitLoad) || math.IsInf(*req.SplitLoad, 0) {
			return wire.DatastoreSettingsResponse{}, &FieldError{Field: "split_load", Msg: "must be a finite number of requests per second (0: the nodes', negative: off)"}
		}
		spec.SplitLoad = *req.SplitLoad
	}
	if req.SplitSize != nil {
		spec.SplitSize = *req.SplitSize
	}
	cs, err := catalogSpec(spec)
	if err != nil {
		return wire.DatastoreSettingsResponse{}, err
	}
	res, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpSettings, Datastore: name, Settings: cs.Settings})
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return wire.DatastoreSettingsResponse{}, fmt.Errorf("%w: %q", ErrUnknownDatastore, name)
	case errors.Is(err, catalog.ErrBadCommand):
		return wire.DatastoreSettingsResponse{}, &FieldError{Field: "settings", Msg: err.Error()}
	case err != nil:
		return wire.DatastoreSettingsResponse{}, err
	}
	n.log.Info("datastore settings changed", "datastore", name, "leader_zone", spec.LeaderZone, "split_load", spec.SplitLoad,
		"split_size", spec.SplitSize, "generation", res.Generation)
	out := wire.DatastoreSettingsResponse{Generation: res.Generation}
	if cur := n.cat.cur.Load(); cur != nil && cur.Datastores[name] != nil {
		out.Datastore = datastoreInfo(cur.Datastores[name])
	}
	return out, nil
}

// checkSettings checks an OpSettings command's settings for datastore name against the
// catalog as this node (the catalog's leader) holds it: they must decode, change nothing but
// the leader zone and the split thresholds, and name a valid zone. A command from another node
// is checked so, as any internal RPC's input is.
func (n *Node) checkSettings(name string, settings []byte) error {
	c := n.cat.cur.Load()
	if c == nil || c.Datastores[name] == nil {
		return nil // the catalog refuses it: ErrNotFound
	}
	old, err := specOf(c.Datastores[name])
	if err != nil {
		return err
	}
	next, err := specOf(&catalog.Datastore{Name: name, Mode: c.Datastores[name].Mode, Shards: c.Datastores[name].Shards,
		Partitions: c.Datastores[name].Partitions, Settings: settings})
	if err != nil {
		return err
	}
	if next.LeaderZone != "" && !topology.ZonePattern.MatchString(next.LeaderZone) {
		return fmt.Errorf("leader zone %q must match %s", next.LeaderZone, topology.ZonePattern)
	}
	if math.IsNaN(next.SplitLoad) || math.IsInf(next.SplitLoad, 0) {
		return fmt.Errorf("split load %v is not a finite number", next.SplitLoad)
	}
	a, b := *old, *next
	a.LeaderZone, a.SplitLoad, a.SplitSize = "", 0, 0
	b.LeaderZone, b.SplitLoad, b.SplitSize = "", 0, 0
	if !sameLayout(&a, &b) {
		return errors.New("they change more than the leader zone and the split thresholds")
	}
	return nil
}
