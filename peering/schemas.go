package peering

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/wire"
)

// SchemaBackend is what the schema sync reads of the local cluster (cluster.Node has it).
type SchemaBackend interface {
	// Schemas reads the schemas of datastore ds: every version of column, or with column ""
	// the latest version of every column; sorted by column, then version.
	Schemas(ctx context.Context, ds, column string, c cluster.Consistency) ([]schemas.Version, error)
}

// syncSchemas sends the peer the schema versions of datastore ds that it lacks, every
// interval, until ctx ends: per column, when the peer's versions are the first of this
// cluster's (the same texts, in order), the ones after them are registered at the peer in
// order (PutSchemaFrom: the peer numbers them alike). A peer holding more is left alone (its
// own stream sends this cluster the rest); one whose versions differ from this
// cluster's at some version has diverged (each cluster registered its own): that is reported
// as the stream's schema error and nothing is sent for the column until an operator aligns
// them. Every node runs it: registering a version the peer holds answers exists.
func (s *sender) syncSchemas(ctx context.Context, be SchemaBackend, ds string, interval time.Duration) {
	for {
		err := s.syncSchemasOnce(ctx, be, ds)
		if ctx.Err() != nil {
			return
		}
		s.st.setSchemaErr(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// syncSchemasOnce is one round of syncSchemas: nil when every column of this cluster is at the
// peer as here or ahead, else the first error.
func (s *sender) syncSchemasOnce(ctx context.Context, be SchemaBackend, ds string) error {
	latest, err := be.Schemas(ctx, ds, "", cluster.Strong)
	if err != nil || len(latest) == 0 {
		return err
	}
	theirs, err := s.cl.Schemas(ctx, "")
	if err != nil {
		return fmt.Errorf("schemas of peer: %w", err)
	}
	peerLatest := map[string]wire.SchemaVersion{}
	for _, v := range theirs.Versions {
		peerLatest[v.Column] = v
	}
	var firstErr error
	for _, l := range latest {
		p, ok := peerLatest[l.Column]
		if ok && p.Version > l.Version {
			continue // further than here: checked from the peer's side
		}
		if ok && p.Version == l.Version {
			if same, err := sameSchema(l.Text, p.Schema); err == nil && same {
				continue
			}
		}
		if err := s.syncColumn(ctx, be, ds, l.Column); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// syncColumn registers at the peer the versions of column it lacks, after checking that those
// it holds are this cluster's first ones.
func (s *sender) syncColumn(ctx context.Context, be SchemaBackend, ds, column string) error {
	ours, err := be.Schemas(ctx, ds, column, cluster.Strong)
	if err != nil {
		return err
	}
	theirs, err := s.cl.Schemas(ctx, column)
	if err != nil {
		return fmt.Errorf("schemas of column %s at peer: %w", column, err)
	}
	for i, v := range theirs.Versions {
		if i >= len(ours) {
			return nil
		}
		same, err := sameSchema(ours[i].Text, v.Schema)
		if err != nil {
			return err
		}
		if !same || v.Version != ours[i].Version {
			return fmt.Errorf("schema of column %s diverged at version %d: the two clusters registered different schemas; nothing is sent for the column until they agree", column, v.Version)
		}
	}
	for _, v := range ours[len(theirs.Versions):] {
		res, err := s.cl.PutSchemaFrom(ctx, column, json.RawMessage(v.Text), s.origin)
		if err != nil {
			return fmt.Errorf("register schema version %d of column %s at peer: %w", v.Version, column, err)
		}
		if res.Version != v.Version {
			return fmt.Errorf("schema of column %s diverged: version %d here is version %d at the peer", column, v.Version, res.Version)
		}
		s.r.log.Info("schema version sent to peer", "datastore", ds, "column", column, "version", v.Version)
	}
	return nil
}

// sameSchema reports whether two schema texts are the same schema (white space aside).
func sameSchema(a, b []byte) (bool, error) {
	ca, err := schemas.Canonical(a)
	if err != nil {
		return false, err
	}
	cb, err := schemas.Canonical(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}
