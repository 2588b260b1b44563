// Package indexes is the pure model of secondary indexes: definitions, typed field values,
// index entries and their merge rule, query compilation and reference evaluation, and the index
// catalog's state machine. It does no I/O, reads no clock and draws no random numbers: storage
// keeps the entries, a consumer of the shard logs maintains them, raft replicates the catalog.
//
// # Definitions
//
// An index is declared per datastore in YAML, in the Schemaless paper's form (ParseDefinition):
//
//	table: driver_partner_index        # the index's name
//	datastore: trips
//	shard_field: driver_partner_uuid   # optional; default: the first field of the first column def
//	column_defs:
//	  - column_key: BASE
//	    fields:
//	      - { field: driver_partner_uuid, type: UUID }
//	      - { field: city_uuid, type: UUID }
//	      - { field: trip_created_at, type: datetime }
//
// Each field is a top-level key of the JSON body of its column's cells. Definition.Fields orders
// the fields: the shard field first, then the others as declared; entries, plans and index
// tables use this order. Validate reports every mistake at once.
//
// # Field types and values
//
// A field's type decides its typed value (Convert): UUID -> uuid.UUID; string -> string of at most
// MaxStringBytes bytes; int -> int64; float -> float64; bool -> bool; datetime -> int64 Unix
// microseconds, UTC. Values come from decoded bodies (every numeric form cells.Body.Object
// yields, exactly: 10.0 is the int 10, 10.5 is no int); a value that does not fit is a mismatch
// and indexed as nil (Extract names it, so the maintainer can report it). Query values are typed
// the same way (ParseQueryValue), and answers are rendered by Format. The shard of an entry is
// ShardOf its shard value: for a UUID the row key hash (cells.ShardOf), otherwise FNV-1a 64 of a
// tagged canonical encoding (ValueHash). Both are stable forever.
//
// # Entries and the merge rule
//
// An Entry exists per row key per index version. It holds the typed values of the fields and the
// ref key (Refs) of the source cell each column's values came from. The maintainer reads cells
// from the shard logs, possibly replayed (at-least-once) and in any order across shards, and
// turns each cell into an update carrying that column's values and ref key; Merge applies it only
// when its ref key is newer than the one stored for that column. The stored values of each
// column are thus always those of the cell with the highest ref key seen, whatever the order
// and however often a cell is seen: replays and reordering change nothing. Merge reports whether
// the entry changed, so unchanged entries are not rewritten.
//
// # The shard field is immutable
//
// An entry lives on the index shard of its shard value, so that value cannot change without
// moving the entry. The maintainer derives the shard value of a row from the FIRST cell of the
// shard field's column appended for the row (lowest added_id, storage.PartitionStore.FirstCells:
// the order cells landed in, not their ref keys) and sends every update of the row to that one
// shard, carrying that value in Values[0]; Merge never changes Values[0] of a stored entry. A
// later cell whose shard value differs is a violation: its update sets Violation to its ref key
// (Merge keeps the highest) and changes nothing else of the shard field, while its other fields
// are applied as usual. Rows without a shard value (absent, null, or a mismatch) get no entry.
//
// # Queries
//
// A Query names a shard value (so it reads one index shard), conditions, an order, a page size
// and a cursor; Compile types it against the definition into a Plan, reporting each mistake as a
// *FieldError with the JSON path. ParseCond and ParseScalar read a condition and a value written
// as text (`schemaless index query --where 'delay>60'`) into the values a JSON query carries.
// Evaluate is the reference semantics, by brute force, which the SQL implementation must match:
//
//   - NULLs follow SQL: a nil value satisfies no condition, not even != or in.
//   - UUIDs and strings compare bytewise, bools false < true, numbers numerically.
//   - Results sort by the order field, nil first when ascending and last when descending, ties
//     by row key in the same direction (descending is exactly the reverse of ascending); with no
//     order_by, by row key.
//   - Paging is keyset: NextCursor encodes the last entry's (order value, row key), and the next
//     page starts strictly after it, so concurrent writes never make a page repeat or skip an
//     entry that stayed in place. A cursor is bound to its order_by.
//
// # Catalog
//
// The Catalog of a datastore is a deterministic state machine applied through raft (Apply). An
// index has numbered versions; each is building (the maintainer backfills it by reading the
// shard logs from offset 0), then ready, and the index's alias names the version queries use
// by default (the first ready version becomes the alias). Changing an index is defining a new
// version, waiting for it to be ready, moving the alias, then dropping the old version:
// dropping (its data is being deleted) -> dropped. Version numbers are never reused, and
// re-defining an equal definition is idempotent, so a configuration can be applied repeatedly.
//
// # Caveats
//
// Strings compare bytewise: the SQL layer must use a binary collation. Float fields compare
// numerically but float equality is fragile, so a float cannot be the shard field. A datetime
// string's fraction beyond microseconds is truncated, a number's rounded. Extract reads only
// top-level body keys.
package indexes
