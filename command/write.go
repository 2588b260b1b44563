package command

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/vmihailenco/msgpack/v5"
)

// RequestWindow is how long a partition keeps the outcome of a write that carries an
// idempotency key (Write.ID), measured in the proposer's clock of the commands
// (Append.CreatedAt): a write whose ID was recorded by an append at most RequestWindow older
// answers the recorded outcome (WriteResult.Replayed) and changes nothing. It is a constant,
// not a setting, because every replica must decide alike: a record older than the window is
// ignored by every replica whether or not it has been pruned from its table yet.
const RequestWindow = 10 * time.Minute

// Append is a cell append: client writes to apply in order, and the time the proposer (the
// raft leader, or async mode's node) accepted them, which becomes every created cell's
// created_at (never a follower's clock).
type Append struct {
	// CreatedAt is the proposer's clock; stored with microsecond precision in UTC.
	CreatedAt time.Time
	// Writes are applied in order, each with its own outcome. A key may appear more than once
	// (in one write or several); the first occurrence wins and later ones report exists or
	// conflict against it.
	Writes []Write
}

func (*Append) isCommand() {}

// CheckShards checks every cell and condition of every write against r.
func (a *Append) CheckShards(r cells.ShardRange) error {
	for j := range a.Writes {
		w := &a.Writes[j]
		for i := range w.Cells {
			if s := w.Cells[i].Shard; !r.Contains(s) {
				return outOfRange(fmt.Sprintf("write %d cell %d", j, i), s, r)
			}
		}
		for i := range w.Conditions {
			if s := w.Conditions[i].Shard; !r.Contains(s) {
				return outOfRange(fmt.Sprintf("write %d condition %d", j, i), s, r)
			}
		}
	}
	return nil
}

// CellCount returns the number of cells of every write of a.
func (a *Append) CellCount() int {
	n := 0
	for i := range a.Writes {
		n += len(a.Writes[i].Cells)
	}
	return n
}

// Write is one client write request inside an Append: cells to append, with what the request
// asks of them.
//
//   - ID is the request's idempotency key (uuid.Nil: none; nothing is recorded). The partition
//     records the outcome of a write with an ID, and answers a later write with the same ID
//     within RequestWindow with that outcome instead of applying it (a retry after an
//     indeterminate answer learns what its first attempt did: created stays created).
//
//   - Atomic writes all of Cells or none: a cell whose key holds another body makes the whole
//     write a conflict, and nothing of it is written. Conditions imply Atomic.
//
//   - Conditions must all hold when the append is applied, else nothing is written and the
//     result lists the failed ones (WriteResult.Failed).
//
//   - Origin is the cluster the write's cells were first written in, for a write that carries
//     them from another cluster (replication between clusters): every cell it creates stores
//     it (cells.Cell.Origin). Empty for a client's write in this cluster. When not empty it is
//     a valid cluster name (cells.ValidateClusterName); Append.Validate checks it.
//
// A write's cells and conditions must name shards of the partition that applies it.
type Write struct {
	ID         uuid.UUID
	Atomic     bool
	Conditions []Condition
	Cells      []Cell
	Origin     string
}

// IsAtomic reports whether the write is applied all or nothing (Atomic, or conditional).
func (w *Write) IsAtomic() bool { return w.Atomic || len(w.Conditions) > 0 }

// Fingerprint is a 64-bit FNV-1a hash of what w asks: its atomicity, conditions and cells
// (shards, keys and encoded bodies). Two writes under one ID with different fingerprints are
// different requests (WriteResult.KeyReused).
func (w *Write) Fingerprint() uint64 {
	h := printer{fnv.New64a()}
	h.flag(w.IsAtomic())
	h.num(int64(len(w.Conditions)))
	for i := range w.Conditions {
		h.condition(&w.Conditions[i])
	}
	h.num(int64(len(w.Cells)))
	for i := range w.Cells {
		h.cell(&w.Cells[i])
	}
	if w.Origin != "" {
		// Only when set, so that the fingerprints of local writes (stored in request
		// records) are those of builds without origins.
		h.Write([]byte(w.Origin))
	}
	return h.Sum64()
}

// printer writes the parts of a write into a 64-bit FNV-1a hash (Fingerprint, shardPrints).
type printer struct{ hash.Hash64 }

func (h printer) num(v int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	_, _ = h.Write(b[:])
}

func (h printer) str(s string) {
	h.num(int64(len(s)))
	_, _ = h.Write([]byte(s))
}

func (h printer) flag(on bool) {
	if on {
		h.num(1)
	} else {
		h.num(0)
	}
}

func (h printer) condition(c *Condition) {
	h.num(int64(c.Shard))
	_, _ = h.Write(c.RowKey[:])
	h.str(c.ColumnKey)
	h.num(c.LatestRefKey)
	h.flag(c.None)
}

func (h printer) cell(c *Cell) {
	h.num(int64(c.Shard))
	_, _ = h.Write(c.Key.RowKey[:])
	h.str(c.Key.ColumnKey)
	h.num(c.Key.RefKey)
	h.num(int64(len(c.Body)))
	_, _ = h.Write(c.Body)
}

// Cell is one cell of a Write. Shard is computed by the proposer from the row key and the
// datastore's shard count (cells.ShardOf) and must lie in the partition's shard range.
//
// Its MessagePack form is the array [shard int32, row key (16 bytes), column key, ref key
// int64, body].
type Cell struct {
	Shard int
	Key   cells.Key
	Body  cells.Body
}

// Condition is a compare part of a compare-and-append: the latest ref key of a column (the
// highest ref key of a row key and column key, in shard Shard) must be LatestRefKey, or, with
// None, the column must have no cell.
//
// Its MessagePack form is the array [shard int32, row key (16 bytes), column key, latest ref
// key int64, none].
type Condition struct {
	Shard        int
	RowKey       uuid.UUID
	ColumnKey    string
	LatestRefKey int64
	None         bool
}

// WriteResult is the outcome of one Write, the same on every replica.
//
// A write that was applied has one cells.Result per cell in Cells (created, exists, or, for a
// write that is not atomic, conflict; async mode adds buffered). A write that was refused has
// Failed (conditions that did not hold), Conflict (an atomic write met a stored key with
// another body; Cells tells which: those cells have StatusConflict and the added_id of the
// stored cell, the others an empty Status) or Violation (a cell its column's schema rejects)
// set, and nothing of it was written. Replayed says the outcome is the one recorded for an
// earlier write with the same ID (nothing was applied this time); KeyReused that the ID was
// recorded for a different write (other cells or conditions), which is refused and changes
// nothing.
type WriteResult struct {
	Cells     []cells.Result
	Failed    []ConditionFailure
	Conflict  bool
	Violation *schemas.CellViolation
	Replayed  bool
	KeyReused bool
}

// Applied reports whether the write's cells were stored (created or found stored): not
// refused by a condition, a conflict of an atomic write, a schema or a reused ID.
func (r *WriteResult) Applied() bool {
	return len(r.Failed) == 0 && !r.Conflict && r.Violation == nil && !r.KeyReused
}

// ConditionFailure is one condition of a write that did not hold: its index in
// Write.Conditions and the column's latest ref key at apply time (Found false: no cell).
type ConditionFailure struct {
	Index        int
	LatestRefKey int64
	Found        bool
}

// The layouts of an append (KindCells, KindAppend). Cells and conditions encode themselves.
type cellsLayout struct {
	_msgpack        struct{} `msgpack:",as_array"`
	CreatedAtMicros int64
	Cells           []Cell
}

type appendLayout struct {
	_msgpack        struct{} `msgpack:",as_array"`
	CreatedAtMicros int64
	Writes          []writeLayout
}

type writeLayout struct {
	_msgpack   struct{} `msgpack:",as_array"`
	ID         []byte   // empty: no ID
	Atomic     bool
	Conditions []Condition
	Cells      []Cell
}

// appendOriginLayout is KindAppendOrigin's: appendLayout with an origin after each write.
type appendOriginLayout struct {
	_msgpack        struct{} `msgpack:",as_array"`
	CreatedAtMicros int64
	Writes          []writeOriginLayout
}

type writeOriginLayout struct {
	_msgpack   struct{} `msgpack:",as_array"`
	ID         []byte
	Atomic     bool
	Conditions []Condition
	Cells      []Cell
	Origin     string
}

// hasOrigin reports whether a write of a carries an origin (KindAppendOrigin).
func (a *Append) hasOrigin() bool {
	for i := range a.Writes {
		if a.Writes[i].Origin != "" {
			return true
		}
	}
	return false
}

// Validate checks what the state machine cannot: every write's origin is empty or a valid
// cluster name. The error is a *cells.FieldError naming "writes[i].origin".
func (a *Append) Validate() error {
	for i := range a.Writes {
		if o := a.Writes[i].Origin; o != "" {
			if err := cells.ValidateClusterName(fmt.Sprintf("writes[%d].origin", i), o); err != nil {
				return err
			}
		}
	}
	return nil
}

// plain reports whether a fits the KindCells layout: one write (or none) with no ID, no
// conditions, not atomic.
func (a *Append) plain() bool {
	if len(a.Writes) > 1 {
		return false
	}
	for i := range a.Writes {
		w := &a.Writes[i]
		if w.ID != uuid.Nil || w.IsAtomic() {
			return false
		}
	}
	return true
}

// layout returns the kind and layout Encode writes for a: the oldest that holds it.
func (a *Append) layout() (Kind, any) {
	at := a.CreatedAt.UnixMicro()
	if !a.hasOrigin() && a.plain() {
		l := &cellsLayout{CreatedAtMicros: at}
		if len(a.Writes) == 1 {
			l.Cells = a.Writes[0].Cells
		}
		return KindCells, l
	}
	ws := make([]writeOriginLayout, len(a.Writes))
	for i := range a.Writes {
		w := &a.Writes[i]
		ws[i] = writeOriginLayout{Atomic: w.Atomic, Conditions: w.Conditions, Cells: w.Cells, Origin: w.Origin}
		if w.ID != uuid.Nil {
			ws[i].ID = w.ID[:]
		}
	}
	if a.hasOrigin() {
		return KindAppendOrigin, &appendOriginLayout{CreatedAtMicros: at, Writes: ws}
	}
	l := &appendLayout{CreatedAtMicros: at, Writes: make([]writeLayout, len(ws))}
	for i, w := range ws {
		l.Writes[i] = writeLayout{ID: w.ID, Atomic: w.Atomic, Conditions: w.Conditions, Cells: w.Cells}
	}
	return KindAppend, l
}

func decodeAppend(kind Kind, data []byte) (*Append, error) {
	if kind == KindCells {
		var l cellsLayout
		if err := msgpack.Unmarshal(data, &l); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadCommand, kind, err)
		}
		return &Append{CreatedAt: time.UnixMicro(l.CreatedAtMicros).UTC(), Writes: []Write{{Cells: l.Cells}}}, nil
	}
	var l appendOriginLayout
	if kind == KindAppendOrigin {
		if err := msgpack.Unmarshal(data, &l); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadCommand, kind, err)
		}
	} else {
		var v6 appendLayout
		if err := msgpack.Unmarshal(data, &v6); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadCommand, kind, err)
		}
		l.CreatedAtMicros, l.Writes = v6.CreatedAtMicros, make([]writeOriginLayout, len(v6.Writes))
		for i, w := range v6.Writes {
			l.Writes[i] = writeOriginLayout{ID: w.ID, Atomic: w.Atomic, Conditions: w.Conditions, Cells: w.Cells}
		}
	}
	a := &Append{CreatedAt: time.UnixMicro(l.CreatedAtMicros).UTC(), Writes: make([]Write, len(l.Writes))}
	for i, wl := range l.Writes {
		w := Write{Atomic: wl.Atomic, Conditions: wl.Conditions, Cells: wl.Cells, Origin: wl.Origin}
		if len(wl.ID) > 0 {
			id, err := uuid.FromBytes(wl.ID)
			if err != nil {
				return nil, fmt.Errorf("%w: write %d: id: %w", ErrBadCommand, i, err)
			}
			w.ID = id
		}
		a.Writes[i] = w
	}
	return a, nil
}

// EncodeMsgpack writes c as its array (msgpack.CustomEncoder).
func (c *Cell) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(5); err != nil {
		return err
	}
	if err := e.EncodeInt32(int32(c.Shard)); err != nil {
		return err
	}
	if err := e.EncodeBytes(c.Key.RowKey[:]); err != nil {
		return err
	}
	if err := e.EncodeString(c.Key.ColumnKey); err != nil {
		return err
	}
	if err := e.EncodeInt64(c.Key.RefKey); err != nil {
		return err
	}
	return e.EncodeBytes(c.Body)
}

// DecodeMsgpack reads c from its array (msgpack.CustomDecoder). A row key that is not 16
// bytes is an error.
func (c *Cell) DecodeMsgpack(d *msgpack.Decoder) error {
	if err := decodeArrayLen(d, 5, "cell"); err != nil {
		return err
	}
	var err error
	if c.Shard, err = decodeShard(d); err != nil {
		return err
	}
	if c.Key.RowKey, err = decodeRowKey(d); err != nil {
		return err
	}
	if c.Key.ColumnKey, err = d.DecodeString(); err != nil {
		return err
	}
	if c.Key.RefKey, err = d.DecodeInt64(); err != nil {
		return err
	}
	body, err := d.DecodeBytes()
	c.Body = body
	return err
}

// EncodeMsgpack writes c as its array (msgpack.CustomEncoder).
func (c *Condition) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(5); err != nil {
		return err
	}
	if err := e.EncodeInt32(int32(c.Shard)); err != nil {
		return err
	}
	if err := e.EncodeBytes(c.RowKey[:]); err != nil {
		return err
	}
	if err := e.EncodeString(c.ColumnKey); err != nil {
		return err
	}
	if err := e.EncodeInt64(c.LatestRefKey); err != nil {
		return err
	}
	return e.EncodeBool(c.None)
}

// DecodeMsgpack reads c from its array (msgpack.CustomDecoder).
func (c *Condition) DecodeMsgpack(d *msgpack.Decoder) error {
	if err := decodeArrayLen(d, 5, "condition"); err != nil {
		return err
	}
	var err error
	if c.Shard, err = decodeShard(d); err != nil {
		return err
	}
	if c.RowKey, err = decodeRowKey(d); err != nil {
		return err
	}
	if c.ColumnKey, err = d.DecodeString(); err != nil {
		return err
	}
	if c.LatestRefKey, err = d.DecodeInt64(); err != nil {
		return err
	}
	c.None, err = d.DecodeBool()
	return err
}

func decodeArrayLen(d *msgpack.Decoder, want int, what string) error {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("%s: an array of %d, want %d", what, n, want)
	}
	return nil
}

func decodeShard(d *msgpack.Decoder) (int, error) {
	s, err := d.DecodeInt32()
	return int(s), err
}

func decodeRowKey(d *msgpack.Decoder) (uuid.UUID, error) {
	var rk uuid.UUID
	n, err := d.DecodeBytesLen()
	if err != nil {
		return rk, err
	}
	if n != len(rk) {
		return rk, fmt.Errorf("row key of %d bytes, want %d", n, len(rk))
	}
	err = d.ReadFull(rk[:])
	return rk, err
}
