package cluster

import (
	"strconv"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
)

// Validation of the index commands and index reads of the node RPC (see rpcvalidate.go).

// validateIndexCommand checks an index command sent to partition p: a known op; for a catalog
// command, a partition holding CatalogShard, a known catalog op, a valid index name and version
// and, to define one, a valid definition of that name; for the others a table named as
// indexes.TableName names them, valid fields, entries of the partition's shards with valid
// source columns and ref keys, and bounded counts.
func validateIndexCommand(p *topology.PartitionSpec, cmd *command.Index) error {
	switch cmd.Op {
	case command.IndexCatalog:
		return validateCatalogCommand(p, &cmd.Catalog)
	case command.IndexUpsert, command.IndexDrop, command.IndexErase:
	default:
		return badRPC("op", "%d is not an index operation", cmd.Op)
	}
	if err := validateIndexTable(cmd.Table); err != nil {
		return err
	}
	switch cmd.Op {
	case command.IndexUpsert:
		if err := validateIndexFields(cmd.Fields); err != nil {
			return err
		}
		if err := checkCount("entries", len(cmd.Entries), rpcMaxKeys); err != nil {
			return err
		}
		for i, e := range cmd.Entries {
			field := "entries[" + strconv.Itoa(i) + "]"
			if err := checkInPartition(p, field+".shard", int(e.Shard)); err != nil {
				return err
			}
			for col, ref := range e.Refs {
				if err := cells.ValidateColumnKey(col); err != nil {
					return badRPC(field+".refs", "column %q: %v", col, err)
				}
				if ref < 0 {
					return badRPC(field+".refs", "ref key %d of %s is negative", ref, col)
				}
			}
		}
	case command.IndexErase:
		if err := checkCount("row_keys", len(cmd.RowKeys), rpcMaxKeys); err != nil {
			return err
		}
	}
	return nil
}

// validateCatalogCommand checks a catalog command as the API's index handlers check what they
// send, and that partition p holds the catalog.
func validateCatalogCommand(p *topology.PartitionSpec, c *indexes.Command) error {
	if !p.Shards().Contains(CatalogShard) {
		return badRPC("partition", "partition %d does not hold the catalog (shard %d)", p.ID, CatalogShard)
	}
	if !rpcIndexNamePattern.MatchString(c.Name) {
		return badRPC("catalog.name", "%q is not an index name", c.Name)
	}
	switch c.Op {
	case indexes.OpDefine:
		if c.Definition.Table != c.Name {
			return badRPC("catalog.definition.table", "%q, the command names %q", c.Definition.Table, c.Name)
		}
		if err := c.Definition.Validate(); err != nil {
			return badRPC("catalog.definition", "%v", err)
		}
	case indexes.OpReady, indexes.OpAlias, indexes.OpDrop, indexes.OpDropped:
		if c.Version < 1 {
			return badRPC("catalog.version", "%d, want 1 or more", c.Version)
		}
	default:
		return badRPC("catalog.op", "%q is not a catalog operation", c.Op)
	}
	return nil
}

// validateIndexTable checks an index table name: indexes.TableName of a valid index name and a
// version from 1.
func validateIndexTable(table string) error {
	if !rpcIndexTablePattern.MatchString(table) {
		return badRPC("table", "%q is not an index table (<index>_v<version>)", table)
	}
	return nil
}

// validateIndexFields checks the fields of an index table: 1 to indexes.MaxFields, each with a
// valid name (unique), a known type and a valid source column key.
func validateIndexFields(fields []indexes.Field) error {
	if len(fields) == 0 || len(fields) > indexes.MaxFields {
		return badRPC("fields", "%d fields, want 1 to %d", len(fields), indexes.MaxFields)
	}
	seen := map[string]bool{}
	for i, f := range fields {
		field := "fields[" + strconv.Itoa(i) + "]"
		if !rpcIndexFieldPattern.MatchString(f.Name) || seen[f.Name] {
			return badRPC(field+".name", "%q is not a valid field name or is given twice", f.Name)
		}
		seen[f.Name] = true
		switch f.Type {
		case indexes.TypeUUID, indexes.TypeString, indexes.TypeInt, indexes.TypeFloat, indexes.TypeBool, indexes.TypeDatetime:
		default:
			return badRPC(field+".type", "%q is not a field type", f.Type)
		}
		if err := cells.ValidateColumnKey(f.Column); err != nil {
			return badRPC(field+".column", "%q: %v", f.Column, err)
		}
	}
	return nil
}

// validateIndexRead checks an index query: the table and its fields, an index shard of the
// partition (the plan's), a limit from 1 to rpcMaxPage, and field indexes of the plan (order,
// conditions, projection) within the fields.
func validateIndexRead(p *topology.PartitionSpec, ir *partition.IndexRead) error {
	if err := validateIndexTable(ir.Table); err != nil {
		return err
	}
	if err := validateIndexFields(ir.Fields); err != nil {
		return err
	}
	if err := checkInPartition(p, "index.shard", ir.Shard); err != nil {
		return err
	}
	pl := &ir.Plan
	if pl.Shard != ir.Shard {
		return badRPC("index.plan.shard", "%d, the read is of shard %d", pl.Shard, ir.Shard)
	}
	if pl.Limit < 1 || pl.Limit > rpcMaxPage {
		return badRPC("index.plan.limit", "%d, want 1 to %d", pl.Limit, rpcMaxPage)
	}
	nf := len(ir.Fields)
	if pl.OrderBy < -1 || pl.OrderBy >= nf {
		return badRPC("index.plan.order_by", "field %d of %d", pl.OrderBy, nf)
	}
	if err := checkCount("index.plan.where", len(pl.Where), rpcMaxPage); err != nil {
		return err
	}
	for i, c := range pl.Where {
		field := "index.plan.where[" + strconv.Itoa(i) + "]"
		if c.Column < 0 || c.Column >= nf {
			return badRPC(field, "field %d of %d", c.Column, nf)
		}
		switch c.Op {
		case "=", "!=", "<", "<=", ">", ">=", "in":
		default:
			return badRPC(field+".op", "%q is not a comparison", c.Op)
		}
		if len(c.Values) == 0 || len(c.Values) > rpcMaxKeys || c.Op != "in" && len(c.Values) != 1 {
			return badRPC(field+".values", "%d values for %q", len(c.Values), c.Op)
		}
	}
	for i, f := range pl.Fields {
		if f < 0 || f >= nf {
			return badRPC("index.plan.fields["+strconv.Itoa(i)+"]", "field %d of %d", f, nf)
		}
	}
	for i, c := range pl.Columns {
		if err := cells.ValidateColumnKey(c); err != nil {
			return badRPC("index.plan.columns["+strconv.Itoa(i)+"]", "%q: %v", c, err)
		}
	}
	return nil
}
