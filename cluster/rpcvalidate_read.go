package cluster

import (
	"strconv"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/topology"
)

// validateRead checks a read sent to partition p of datastore ds over the node RPC as the API
// checks the request it came from: a known consistency ("" is strong), exactly one kind of read, and for that
// kind keys valid and of the partition, shards the row keys' and the partition's, positive
// bounded limits, valid column keys, group, index and schema arguments. A log read's wait longer
// than rpcMaxWait is clamped to it. The first problem is returned, wrapping ErrBadRPC.
func validateRead(ds *topology.DatastoreSpec, p *topology.PartitionSpec, req *readRequest) error {
	if req.Consistency != "" && !req.Consistency.Valid() { // "" reads as Strong, as a partition takes it
		return badRPC("consistency", "%q, want %s, %s or a bounded stale read within %s", req.Consistency, Strong, Stale, partition.MaxStalenessLimit)
	}
	rr := &req.Read
	kinds := 0
	for _, set := range []bool{rr.Get != nil, rr.Row != nil, rr.Log != nil, rr.Group != nil, rr.Groups != nil,
		rr.Catalog != nil, rr.FirstCells != nil, rr.Index != nil, rr.IndexStats != nil, rr.Versions != nil,
		rr.Schemas != nil, rr.SchemaCheck != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return badRPC("read", "%d kinds of read, want exactly one", kinds)
	}
	switch {
	case rr.Get != nil:
		return validateGetRead(ds, p, rr.Get)
	case rr.Row != nil:
		return checkShard(ds, p, "row.shard", rr.Row.RowKey, rr.Row.Shard)
	case rr.Log != nil:
		return validateLogRead(p, rr.Log)
	case rr.Group != nil:
		if err := validateGroupName(ds, p, rr.Group.Group); err != nil {
			return err
		}
		if rr.Group.Shards != 0 && rr.Group.Shards != ds.Shards { // 0: a sender of a build before the check
			return badRPC("group.shards", "%d, the datastore has %d", rr.Group.Shards, ds.Shards)
		}
	case rr.Groups != nil:
		if rr.Groups.Shards != 0 && rr.Groups.Shards != ds.Shards {
			return badRPC("groups.shards", "%d, the datastore has %d (or 0: every group)", rr.Groups.Shards, ds.Shards)
		}
	case rr.Catalog != nil:
		if !p.Shards().Contains(CatalogShard) {
			return badRPC("partition", "partition %d does not hold the catalog (shard %d)", p.ID, CatalogShard)
		}
	case rr.FirstCells != nil:
		return validateFirstCells(ds, p, rr.FirstCells)
	case rr.Index != nil:
		return validateIndexRead(p, rr.Index)
	case rr.IndexStats != nil:
		if err := validateIndexTable(rr.IndexStats.Table); err != nil {
			return err
		}
		return validateIndexFields(rr.IndexStats.Fields)
	case rr.Versions != nil:
		v := rr.Versions
		if err := checkShard(ds, p, "versions.shard", v.RowKey, v.Shard); err != nil {
			return err
		}
		if err := cells.ValidateColumnKey(v.ColumnKey); err != nil {
			return badRPC("versions.column_key", "%q: %v", v.ColumnKey, err)
		}
		if v.Limit < 1 || v.Limit > rpcMaxPage {
			return badRPC("versions.limit", "%d, want 1 to %d", v.Limit, rpcMaxPage)
		}
		if v.From != nil && *v.From < 0 {
			return badRPC("versions.from", "ref key %d is negative", *v.From)
		}
	case rr.Schemas != nil:
		if c := rr.Schemas.Column; c != "" {
			if err := cells.ValidateColumnKey(c); err != nil {
				return badRPC("schemas.column", "%q: %v", c, err)
			}
		}
	case rr.SchemaCheck != nil:
		sc := rr.SchemaCheck
		if err := cells.ValidateColumnKey(sc.Column); err != nil {
			return badRPC("schema_check.column", "%q: %v", sc.Column, err)
		}
		if sc.Examples < 0 || sc.Examples > partition.MaxSchemaCheckExamples {
			return badRPC("schema_check.examples", "%d, want 0 to %d", sc.Examples, partition.MaxSchemaCheckExamples)
		}
		if _, err := schemas.Compile(sc.Text); err != nil {
			return badRPC("schema_check.text", "%v", err)
		}
	}
	return nil
}

func validateGetRead(ds *topology.DatastoreSpec, p *topology.PartitionSpec, g *partition.GetRead) error {
	if len(g.Keys) == 0 || len(g.Keys) > rpcMaxKeys {
		return badRPC("get.keys", "%d keys, want 1 to %d", len(g.Keys), rpcMaxKeys)
	}
	for i, k := range g.Keys {
		field := "get.keys[" + strconv.Itoa(i) + "]"
		if err := k.Key.Validate(); err != nil {
			return badRPC(field, "%v", err)
		}
		if err := checkShard(ds, p, field, k.Key.RowKey, k.Shard); err != nil {
			return err
		}
	}
	return nil
}

func validateLogRead(p *topology.PartitionSpec, lr *partition.LogRead) error {
	if len(lr.Shards) == 0 || len(lr.Shards) > p.LastShard-p.FirstShard+1 {
		return badRPC("log.shards", "%d shards, want 1 to the partition's %d", len(lr.Shards), p.LastShard-p.FirstShard+1)
	}
	seen := make(map[int]bool, len(lr.Shards))
	for i, sl := range lr.Shards {
		field := "log.shards[" + strconv.Itoa(i) + "]"
		if err := checkInPartition(p, field, sl.Shard); err != nil {
			return err
		}
		if seen[sl.Shard] {
			return badRPC(field, "shard %d given twice", sl.Shard)
		}
		seen[sl.Shard] = true
		if sl.Location < 0 {
			return badRPC(field+".location", "%d is negative", sl.Location)
		}
	}
	switch lr.LocationType {
	case "", LocationAddedID, LocationTimestamp:
	default:
		return badRPC("log.location_type", "%q must be %s or %s", lr.LocationType, LocationAddedID, LocationTimestamp)
	}
	if lr.ColumnKey != "" {
		if err := cells.ValidateColumnKey(lr.ColumnKey); err != nil {
			return badRPC("log.column_key", "%q: %v", lr.ColumnKey, err)
		}
	}
	if lr.Limit < 1 || lr.Limit > rpcMaxPage {
		return badRPC("log.limit", "%d, want 1 to %d", lr.Limit, rpcMaxPage)
	}
	if lr.Wait < 0 {
		return badRPC("log.wait", "%v is negative", lr.Wait)
	}
	lr.Wait = min(lr.Wait, rpcMaxWait)
	return nil
}

func validateFirstCells(ds *topology.DatastoreSpec, p *topology.PartitionSpec, fc *partition.FirstCellsRead) error {
	if err := checkInPartition(p, "first_cells.shard", fc.Shard); err != nil {
		return err
	}
	if err := cells.ValidateColumnKey(fc.Column); err != nil {
		return badRPC("first_cells.column", "%q: %v", fc.Column, err)
	}
	if err := checkCount("first_cells.row_keys", len(fc.RowKeys), rpcMaxKeys); err != nil {
		return err
	}
	for i, rk := range fc.RowKeys {
		if err := checkShard(ds, p, "first_cells.row_keys["+strconv.Itoa(i)+"]", rk, fc.Shard); err != nil {
			return err
		}
	}
	if fc.AtLeast < 0 {
		return badRPC("first_cells.at_least", "%d is negative", fc.AtLeast)
	}
	return nil
}
