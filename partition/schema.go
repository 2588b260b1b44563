package partition

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/storage"
)

// Limits of a schema dry run (SchemaCheckRead).
const (
	// MaxSchemaCheckExamples bounds SchemaCheckRead.Examples.
	MaxSchemaCheckExamples = 100
	// schemaCheckPage is how many cells of a shard's log one statement of a dry run reads.
	schemaCheckPage = 1000
)

// ApplySchema proposes one schema command (register a version of a column's schema on this
// partition, command.Schema) and returns its outcome, a value: created, exists, conflict,
// gap or invalid. It must be called on the leader (else *NotLeaderError) and blocks until the
// entry is applied on this replica or ctx ends. The entry's CreatedAt is set here, from the
// leader's clock.
//
// Errors: *NotLeaderError and ErrUnavailable (nothing applied); ErrIndeterminate (maybe
// applied: a schema command is safe to retry, the same text again answers exists).
func (p *Raft) ApplySchema(ctx context.Context, cmd command.Schema) (command.SchemaResult, error) {
	var res command.SchemaResult
	err := p.applyOne(ctx, func(now time.Time) ([]byte, error) {
		cmd.CreatedAt = now
		return command.Encode(&cmd)
	}, func(f raft.ApplyFuture) (err error) {
		res, err = fsm.ResultOf[command.SchemaResult](f)
		return err
	})
	if err != nil {
		return command.SchemaResult{}, err // res may still be written by the abandoned wait
	}
	return res, nil
}

// ApplySchema applies one schema command on the primary master (see Raft.ApplySchema). There
// is no buffered path: with no master the command is refused. Errors: ErrUnavailable (no
// master: nothing applied), ErrIndeterminate (the master failed during the command).
func (a *Async) ApplySchema(ctx context.Context, cmd command.Schema) (command.SchemaResult, error) {
	cmd.CreatedAt = time.Now().UTC().Truncate(time.Microsecond)
	data, err := command.Encode(&cmd)
	if err != nil {
		return command.SchemaResult{}, err
	}
	return applyAs[command.SchemaResult](ctx, a, data)
}

// violationOf returns the outcome of a write whose share sub (the cells of w at indexes
// pending) the master refused with a schema violation, its cell index counted in w.
func violationOf(r command.WriteResult, pending []int) command.WriteResult {
	v := *r.Violation
	if v.Cell >= 0 && v.Cell < len(pending) {
		v.Cell = pending[v.Cell]
	}
	return command.WriteResult{Violation: &v, Replayed: r.Replayed}
}

// SchemasRead reads the column schemas the partition holds: every version of Column, or of
// every column when Column is ""; with Latest only the latest version of each column. The
// answer is ReadResult.Schemas, sorted by column then version.
type SchemasRead struct {
	Column string
	Latest bool
}

// SchemaCheckRead is a dry run of a schema over the partition's cells: Text (a JSON Schema,
// see package schemas) is checked against the latest cell of Column of every row of the
// partition (the cell with the highest ref key), found by reading each shard's log, filtered
// by column, from the start (a whole scan of the shards' tables: it takes time on a large
// partition). Examples (0 to MaxSchemaCheckExamples) is how many rejected cells to describe.
// The answer is ReadResult.SchemaCheck. A Text that does not compile is ErrBadRead.
type SchemaCheckRead struct {
	Column   string
	Text     []byte
	Examples int
}

// SchemaCheck is the answer to a SchemaCheckRead: Rows is the number of rows with a cell of
// the column (each row's latest cell was checked), Rejected how many of those cells the schema
// rejects, Examples the first rejected ones by row key (at most the read's Examples).
type SchemaCheck struct {
	Rows     int64
	Rejected int64
	Examples []SchemaRejection
}

// SchemaRejection describes a cell a dry run rejected: its row, ref key and the violation.
type SchemaRejection struct {
	RowKey  uuid.UUID
	RefKey  int64
	Pointer string
	Message string
}

// readSchemas serves a SchemasRead.
func readSchemas(ctx context.Context, st *storage.PartitionStore, req SchemasRead) ([]schemas.Version, error) {
	if req.Column != "" {
		if err := validColumn(req.Column); err != nil {
			return nil, err
		}
	}
	return fsm.LoadSchemas(ctx, st, req.Column, req.Latest)
}

func validColumn(col string) error {
	if err := cells.ValidateColumnKey(col); err != nil {
		return fmt.Errorf("%w: column %q: %w", ErrBadRead, col, err)
	}
	return nil
}

// checkSchema serves a SchemaCheckRead, shard by shard.
func checkSchema(ctx context.Context, st *storage.PartitionStore, shards cells.ShardRange, req SchemaCheckRead) (*SchemaCheck, error) {
	if err := validColumn(req.Column); err != nil {
		return nil, err
	}
	if req.Examples < 0 || req.Examples > MaxSchemaCheckExamples {
		return nil, fmt.Errorf("%w: %d examples, want 0 to %d", ErrBadRead, req.Examples, MaxSchemaCheckExamples)
	}
	s, err := schemas.Compile(req.Text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRead, err)
	}
	type latest struct {
		ref int64
		v   *schemas.Violation
	}
	out := &SchemaCheck{}
	for shard := shards.First; shard <= shards.Last; shard++ {
		rows := map[uuid.UUID]latest{}
		after := int64(0)
		for {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w: schema dry run: %w", ErrUnavailable, err)
			}
			cs, next, _, err := st.ReadLog(ctx, shard, after, req.Column, schemaCheckPage)
			if err != nil {
				return nil, fmt.Errorf("partition: schema dry run: shard %d: %w", shard, err)
			}
			for _, c := range cs {
				if c.Key.IsTombstone() {
					// A column-filtered log keeps tombstones: the row's cells before it are erased.
					delete(rows, c.RowKey)
					continue
				}
				if c.ColumnKey != req.Column {
					continue
				}
				if cur, ok := rows[c.RowKey]; ok && c.RefKey < cur.ref {
					continue // an older version than one seen: never the latest
				}
				v, err := s.Validate(c.Body)
				if err != nil {
					v = &schemas.Violation{Message: err.Error()}
				}
				rows[c.RowKey] = latest{ref: c.RefKey, v: v}
			}
			if len(cs) < schemaCheckPage {
				break
			}
			after = next
		}
		for rk, l := range rows {
			out.Rows++
			if l.v == nil {
				continue
			}
			out.Rejected++
			if req.Examples > 0 {
				out.Examples = append(out.Examples, SchemaRejection{RowKey: rk, RefKey: l.ref, Pointer: l.v.Pointer, Message: l.v.Message})
			}
		}
		out.Examples = firstExamples(out.Examples, req.Examples)
	}
	return out, nil
}

// firstExamples sorts rejections by row key and keeps the first n.
func firstExamples(es []SchemaRejection, n int) []SchemaRejection {
	sort.Slice(es, func(i, j int) bool { return es[i].RowKey.String() < es[j].RowKey.String() })
	if len(es) > n {
		es = es[:n]
	}
	return es
}

// violatingRow finds the buffered row whose cell the master refused by a schema in res, the
// answer to the replay command sent (its cells are some of rs, in order): its index in rs.
func violatingRow(res *fsm.Response, sent []byte, rs []storage.BufferedCell) (int, *schemas.CellViolation, bool) {
	if res == nil || sent == nil {
		return 0, nil, false
	}
	ws, err := fsm.Unwrap[[]command.WriteResult](res)
	if err != nil || len(ws) != 1 || ws[0].Violation == nil {
		return 0, nil, false
	}
	v := ws[0].Violation
	cmd, err := command.DecodeAs[*command.Append](sent)
	if err != nil || len(cmd.Writes) != 1 || v.Cell < 0 || v.Cell >= len(cmd.Writes[0].Cells) {
		return 0, nil, false
	}
	k := cmd.Writes[0].Cells[v.Cell].Key
	for i := range rs {
		if rs[i].Cell.Key == k {
			return i, v, true
		}
	}
	return 0, nil, false
}
