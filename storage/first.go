package storage

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
)

// maxFirstCellsKeys bounds the row keys of one FirstCells statement.
const maxFirstCellsKeys = 500

// FirstCells returns, for each row key of rowKeys (all of shard), the first cell of column
// appended for it: the one with the lowest added_id. Row keys with no cell of column are absent
// from the map. Index maintenance reads the shard field from these cells, so an entry's index
// shard never moves when later cells change the shard field. It runs one statement per 500 row
// keys on the read pool (committed data only); a shard whose tables do not exist reads as
// empty. Errors: ErrShardRange, ErrClosed, or the engine's error.
func (p *PartitionStore) FirstCells(ctx context.Context, shard int, column string, rowKeys []uuid.UUID) (map[uuid.UUID]cells.Cell, error) {
	if err := p.checkShard(shard); err != nil {
		return nil, err
	}
	if p.pb != nil {
		return p.pebbleFirstCells(shard, column, rowKeys)
	}
	out := make(map[uuid.UUID]cells.Cell, len(rowKeys))
	for start := 0; start < len(rowKeys); start += maxFirstCellsKeys {
		chunk := rowKeys[start:min(start+maxFirstCellsKeys, len(rowKeys))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, column)
		for _, rk := range chunk {
			args = append(args, rk[:])
		}
		q := "SELECT " + cellColumns + " FROM " + p.d.entity(shard) + p.d.lookupHint +
			" WHERE column_name = ? AND row_key IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
		cs, err := queryCells(ctx, p.read, q, args...)
		if err != nil {
			return nil, p.fail(fmt.Sprintf("first cells of column %s in shard %d", column, shard), err)
		}
		// No ORDER BY: SQLite would rather scan the table in added_id (rowid) order than sort
		// the few rows the unique key finds; the lowest added_id per row is kept here.
		for _, c := range cs {
			if f, ok := out[c.Key.RowKey]; !ok || c.AddedID < f.AddedID {
				out[c.Key.RowKey] = c
			}
		}
	}
	return out, nil
}
