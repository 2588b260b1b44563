package command

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/vmihailenco/msgpack/v5"
)

// Record is a request record: the outcome of a write with an ID (Write.ID) as its partition
// applied it, kept for RequestWindow so that a retry with the ID is answered from it (Answer)
// instead of being applied again.
//
// A record describes its write shard by shard, so that it still answers a retry after the
// partition's shards were divided or joined: a split copies every record into both halves,
// and a retry then sends each half only the cells of its own shards; a merge joins the records
// of one ID that the two partitions held (JoinRecords), each the outcome of that partition's
// share of one client request.
type Record struct {
	// Fingerprint is Write.Fingerprint of the recorded write; 0 for a record of several parts.
	Fingerprint uint64
	// Parts are the recorded shares of one request: one when the record is written, more after
	// a merge joined records of the same ID.
	Parts []RecordPart
}

// RecordPart is the outcome of one share of a request (one Write applied by one partition).
type RecordPart struct {
	// Result is the outcome; its Replayed and KeyReused are false.
	Result WriteResult
	// Shards holds the shard of each cell of the write, in the write's order; nil in a record
	// written before records held shards (such a record answers only the identical write).
	Shards []int
	// Prints holds, per shard of the write (cells or conditions), in order of first
	// appearance, the FNV-1a hash of the write's atomicity and of what it asks of that shard.
	Prints []ShardPrint
}

// ShardPrint is the hash of what a write asks of one shard (RecordPart.Prints).
type ShardPrint struct {
	Shard int
	Print uint64
}

// NewRecord returns the record of write w applied with outcome r (its Replayed and KeyReused
// are not kept: a record is always of a first attempt).
func NewRecord(w *Write, r *WriteResult) Record {
	res := *r
	res.Replayed, res.KeyReused = false, false
	shards := make([]int, len(w.Cells))
	for i := range w.Cells {
		shards[i] = w.Cells[i].Shard
	}
	return Record{Fingerprint: w.Fingerprint(), Parts: []RecordPart{{Result: res, Shards: shards, Prints: w.shardPrints()}}}
}

// shardPrints returns, per shard of w in order of first appearance (conditions, then cells),
// the FNV-1a hash of w's atomicity, then of that shard's conditions and cells in w's order,
// each encoded as Fingerprint encodes it.
func (w *Write) shardPrints() []ShardPrint {
	var order []int
	prints := map[int]printer{}
	of := func(shard int) printer {
		h, ok := prints[shard]
		if !ok {
			h = printer{fnv.New64a()}
			h.flag(w.IsAtomic())
			prints[shard] = h
			order = append(order, shard)
		}
		return h
	}
	for i := range w.Conditions {
		of(w.Conditions[i].Shard).condition(&w.Conditions[i])
	}
	for i := range w.Cells {
		of(w.Cells[i].Shard).cell(&w.Cells[i])
	}
	out := make([]ShardPrint, len(order))
	for i, s := range order {
		out[i] = ShardPrint{Shard: s, Print: prints[s].Sum64()}
	}
	return out
}

// Answer returns the outcome that write w, a write with the record's ID, gets: the recorded
// outcome (Replayed) when w asks what was recorded, else a refusal as a reused key
// (KeyReused, Replayed); or fresh, when w is not atomic and the record holds none of w's
// shards: w is then another share of the recorded request (a node that routed it by a newer
// catalog than the share recorded here, which a split copied from the parent), to be applied
// and added to the record (Extend), as a partition the request had not touched applies its
// share.
//
// w asks what was recorded when it is the recorded write itself (the same Fingerprint), or,
// for a write that is not atomic, when every shard of w is in a part of the record with the
// same print: w is then the recorded request's share of the shards this partition holds now,
// after a split divided or a merge joined the partitions. Its outcome is assembled from the
// parts: each cell of w gets the recorded result of its shard's next cell. A part refused by a
// schema (Violation) refuses w: with the violating cell's index in w when that cell's shard is
// in w, else with Cell -1 (the cell went to another partition, which reports it).
func (rec *Record) Answer(w *Write) (out WriteResult, fresh bool) {
	if !w.IsAtomic() && rec.holdsNone(w) {
		return WriteResult{}, true
	}
	return rec.answer(w), false
}

// holdsNone reports whether no part of rec holds any shard of w (a record of the earlier
// layout holds them all).
func (rec *Record) holdsNone(w *Write) bool {
	held := rec.Shards()
	if held == nil {
		return false
	}
	for _, s := range w.Shards() {
		if held[s] {
			return false
		}
	}
	return true
}

// Shards returns the shards the record holds, those of its parts' writes (cells and
// conditions); nil when a part is of the earlier layout, which holds them all.
func (rec *Record) Shards() map[int]bool {
	held := map[int]bool{}
	for _, p := range rec.Parts {
		if p.Shards == nil {
			return nil
		}
		for _, sp := range p.Prints {
			held[sp.Shard] = true
		}
	}
	return held
}

// Shards returns the shards w touches, with its conditions or cells, in order of first
// appearance (conditions first).
func (w *Write) Shards() []int {
	var out []int
	seen := map[int]bool{}
	add := func(s int) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for i := range w.Conditions {
		add(w.Conditions[i].Shard)
	}
	for i := range w.Cells {
		add(w.Cells[i].Shard)
	}
	return out
}

// Extend returns rec with the outcome r of w, another share of the recorded request that
// Answer found fresh, as one more part; of an empty rec, NewRecord(w, r).
func (rec Record) Extend(w *Write, r *WriteResult) Record {
	add := NewRecord(w, r)
	if len(rec.Parts) == 0 {
		return add
	}
	return Record{Parts: append(slices.Clone(rec.Parts), add.Parts...)}
}

// answer is Answer for a write that is not fresh.
func (rec *Record) answer(w *Write) WriteResult {
	reused := WriteResult{KeyReused: true, Replayed: true}
	if len(rec.Parts) == 1 && rec.Fingerprint == w.Fingerprint() {
		out := rec.Parts[0].Result
		out.Cells = slices.Clone(out.Cells)
		out.Failed = slices.Clone(out.Failed)
		if v := out.Violation; v != nil {
			c := *v
			out.Violation = &c
		}
		out.Replayed = true
		return out
	}
	if w.IsAtomic() {
		return reused
	}
	owner := map[int]*RecordPart{}
	for _, sp := range w.shardPrints() {
		p := rec.partOf(sp)
		if p == nil {
			return reused
		}
		owner[sp.Shard] = p
	}
	// The recorded results of each shard, in order.
	queues := map[int][]int{} // shard -> indexes into its part's Result.Cells
	var violation *WriteResult
	for s, p := range owner {
		if v := p.Result.Violation; v != nil {
			if violation == nil || violation.Violation.Cell < 0 {
				violation = &WriteResult{Violation: p.violationIn(w, s), Replayed: true}
			}
			continue
		}
		for i, ps := range p.Shards {
			if ps == s {
				queues[s] = append(queues[s], i)
			}
		}
	}
	if violation != nil {
		return *violation
	}
	out := WriteResult{Cells: make([]cells.Result, len(w.Cells)), Replayed: true}
	for i := range w.Cells {
		s := w.Cells[i].Shard
		q := queues[s]
		if len(q) == 0 {
			return reused
		}
		out.Cells[i] = owner[s].Result.Cells[q[0]]
		queues[s] = q[1:]
	}
	return out
}

// partOf returns the part of rec that recorded shard sp.Shard with print sp.Print, or nil.
// Only a part that holds its shards and was not refused by a condition or a conflict (which
// only atomic writes are) qualifies.
func (rec *Record) partOf(sp ShardPrint) *RecordPart {
	for i := range rec.Parts {
		p := &rec.Parts[i]
		if p.Shards == nil || len(p.Result.Failed) > 0 || p.Result.Conflict {
			continue
		}
		if p.Result.Violation == nil && len(p.Result.Cells) != len(p.Shards) {
			continue
		}
		for _, q := range p.Prints {
			if q == sp {
				return p
			}
		}
	}
	return nil
}

// violationIn returns p's violation as write w, whose shard s p answers, reports it: the index
// in w of the violating cell when that cell is in shard s (the same rank among s's cells), else
// -1.
func (p *RecordPart) violationIn(w *Write, s int) *schemas.CellViolation {
	v := *p.Result.Violation
	at := v.Cell
	v.Cell = -1
	if at < 0 || at >= len(p.Shards) || p.Shards[at] != s {
		return &v
	}
	rank := 0
	for _, ps := range p.Shards[:at] {
		if ps == s {
			rank++
		}
	}
	for i := range w.Cells {
		if w.Cells[i].Shard != s {
			continue
		}
		if rank == 0 {
			v.Cell = i
			return &v
		}
		rank--
	}
	return &v
}

// JoinRecords returns the encoded record that holds the parts of the encoded records a and b,
// both of one ID (a merge met the ID in both partitions): a's parts, then those of b's that a
// does not hold. A record from before records held shards cannot be joined: a is kept. Errors
// are the decoder's or encoder's.
func JoinRecords(a, b []byte) ([]byte, error) {
	ra, err := DecodeRecord(a)
	if err != nil {
		return nil, err
	}
	rb, err := DecodeRecord(b)
	if err != nil {
		return nil, err
	}
	for _, p := range slices.Concat(ra.Parts, rb.Parts) {
		if p.Shards == nil {
			return a, nil
		}
	}
	joined := Record{Fingerprint: ra.Fingerprint, Parts: ra.Parts}
	for _, p := range rb.Parts {
		if !slices.ContainsFunc(joined.Parts, func(q RecordPart) bool { return reflect.DeepEqual(p, q) }) {
			joined.Parts = append(joined.Parts, p)
		}
	}
	if len(joined.Parts) == len(ra.Parts) {
		return a, nil
	}
	joined.Fingerprint = 0
	return EncodeRecord(&joined)
}

// EncodeRecord returns the stored form of a request record: the MessagePack array
// [fingerprint, parts], each part the array [cells, failed, conflict, violation, shards,
// prints] whose first four are the layout of a write's outcome (EncodeResult).
func EncodeRecord(rec *Record) ([]byte, error) {
	l := recordLayout{Fingerprint: rec.Fingerprint, Parts: make([]partLayout, len(rec.Parts))}
	for i := range rec.Parts {
		p := &rec.Parts[i]
		w := writeLayoutOf(&p.Result)
		pl := partLayout{Cells: w.Cells, Failed: w.Failed, Conflict: w.Conflict, Violation: w.Violation, Shards: make([]int32, len(p.Shards))}
		for j, s := range p.Shards {
			pl.Shards[j] = int32(s)
		}
		for _, sp := range p.Prints {
			pl.Prints = append(pl.Prints, printLayout{Shard: int32(sp.Shard), Print: sp.Print})
		}
		l.Parts[i] = pl
	}
	b, err := msgpack.Marshal(&l)
	if err != nil {
		return nil, fmt.Errorf("command: encode request record: %w", err)
	}
	return b, nil
}

// DecodeRecord parses a request record written by EncodeRecord, or one of the earlier layout
// (the array [fingerprint, cells, failed, conflict, violation]: one part without shards).
// Errors are the decoder's.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) > 0 && b[0] == 0x95 { // a fixarray of 5: the earlier layout
		var l legacyRecordLayout
		if err := msgpack.Unmarshal(b, &l); err != nil {
			return Record{}, fmt.Errorf("command: decode request record: %w", err)
		}
		w := writeResultLayout{Cells: l.Cells, Failed: l.Failed, Conflict: l.Conflict, Violation: l.Violation}
		return Record{Fingerprint: l.Fingerprint, Parts: []RecordPart{{Result: w.result()}}}, nil
	}
	var l recordLayout
	if err := msgpack.Unmarshal(b, &l); err != nil {
		return Record{}, fmt.Errorf("command: decode request record: %w", err)
	}
	rec := Record{Fingerprint: l.Fingerprint, Parts: make([]RecordPart, len(l.Parts))}
	for i, pl := range l.Parts {
		w := writeResultLayout{Cells: pl.Cells, Failed: pl.Failed, Conflict: pl.Conflict, Violation: pl.Violation}
		p := RecordPart{Result: w.result(), Shards: make([]int, len(pl.Shards))}
		for j, s := range pl.Shards {
			p.Shards[j] = int(s)
		}
		for _, sp := range pl.Prints {
			p.Prints = append(p.Prints, ShardPrint{Shard: int(sp.Shard), Print: sp.Print})
		}
		rec.Parts[i] = p
	}
	return rec, nil
}

// recordLayout is a request record as stored.
type recordLayout struct {
	_msgpack    struct{} `msgpack:",as_array"`
	Fingerprint uint64
	Parts       []partLayout
}

type partLayout struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Cells     []cellResultLayout
	Failed    []failureLayout
	Conflict  bool
	Violation []string // cell, column, version, pointer, message (empty: none)
	Shards    []int32
	Prints    []printLayout
}

type printLayout struct {
	_msgpack struct{} `msgpack:",as_array"`
	Shard    int32
	Print    uint64
}

// legacyRecordLayout is a request record of the earlier layout: one outcome, no shards.
type legacyRecordLayout struct {
	_msgpack    struct{} `msgpack:",as_array"`
	Fingerprint uint64
	Cells       []cellResultLayout
	Failed      []failureLayout
	Conflict    bool
	Violation   []string
}
