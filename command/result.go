package command

import (
	"fmt"
	"strconv"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/vmihailenco/msgpack/v5"
)

// resultVersion is the first byte of an encoded result (EncodeResult).
const resultVersion byte = 1

// Result is the outcome of a command as the node RPC carries it: a WriteResult (of one
// write), an IndexResult, a SchemaResult, an EraseResult, a SplitResult, a FreezeResult, a
// MergeResult or a consumer.Result.
type Result interface {
	WriteResult | IndexResult | SchemaResult | EraseResult | SplitResult | FreezeResult | MergeResult | consumer.Result
}

// EncodeResult returns the encoded form of r: a version byte, then MessagePack (a WriteResult
// in the array layout it shares with request records). Errors are the encoder's.
func EncodeResult[T Result](r T) ([]byte, error) {
	var v any = &r
	if w, ok := any(r).(WriteResult); ok {
		v = writeLayoutOf(&w)
	}
	b, err := msgpack.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("command: encode %T: %w", r, err)
	}
	out := make([]byte, 0, len(b)+1)
	return append(append(out, resultVersion), b...), nil
}

// DecodeResult parses data written by EncodeResult for the same T. Errors wrap ErrBadCommand.
func DecodeResult[T Result](data []byte) (T, error) {
	var r T
	if len(data) == 0 || data[0] != resultVersion {
		return r, fmt.Errorf("%w: %T: unknown result version", ErrBadCommand, r)
	}
	if _, ok := any(r).(WriteResult); ok {
		var l writeResultLayout
		if err := msgpack.Unmarshal(data[1:], &l); err != nil {
			return r, fmt.Errorf("%w: %T: %w", ErrBadCommand, r, err)
		}
		w := l.result()
		return any(w).(T), nil
	}
	if err := msgpack.Unmarshal(data[1:], &r); err != nil {
		return r, fmt.Errorf("%w: %T: %w", ErrBadCommand, r, err)
	}
	return r, nil
}

type writeResultLayout struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Cells     []cellResultLayout
	Failed    []failureLayout
	Conflict  bool
	Violation []string // cell, column, version, pointer, message (empty: none)
	Replayed  bool
	KeyReused bool
}

type cellResultLayout struct {
	_msgpack      struct{} `msgpack:",as_array"`
	Status        uint8
	AddedID       int64
	CreatedMicros int64 // 0: no time
}

type failureLayout struct {
	_msgpack     struct{} `msgpack:",as_array"`
	Index        int32
	LatestRefKey int64
	Found        bool
}

func writeLayoutOf(r *WriteResult) *writeResultLayout {
	l := &writeResultLayout{Conflict: r.Conflict, Replayed: r.Replayed, KeyReused: r.KeyReused, Cells: make([]cellResultLayout, len(r.Cells))}
	for i, c := range r.Cells {
		l.Cells[i] = cellResultLayout{Status: uint8(c.Status), AddedID: c.AddedID}
		if !c.CreatedAt.IsZero() {
			l.Cells[i].CreatedMicros = c.CreatedAt.UnixMicro()
		}
	}
	for _, f := range r.Failed {
		l.Failed = append(l.Failed, failureLayout{Index: int32(f.Index), LatestRefKey: f.LatestRefKey, Found: f.Found})
	}
	if v := r.Violation; v != nil {
		l.Violation = []string{strconv.Itoa(v.Cell), v.Column, strconv.Itoa(v.Version), v.Pointer, v.Message}
	}
	return l
}

func (l *writeResultLayout) result() WriteResult {
	r := WriteResult{Conflict: l.Conflict, Replayed: l.Replayed, KeyReused: l.KeyReused}
	if len(l.Cells) > 0 {
		r.Cells = make([]cells.Result, len(l.Cells))
		for i, c := range l.Cells {
			r.Cells[i] = cells.Result{Status: cells.Status(c.Status), AddedID: c.AddedID}
			if c.CreatedMicros != 0 {
				r.Cells[i].CreatedAt = time.UnixMicro(c.CreatedMicros).UTC()
			}
		}
	}
	for _, f := range l.Failed {
		r.Failed = append(r.Failed, ConditionFailure{Index: int(f.Index), LatestRefKey: f.LatestRefKey, Found: f.Found})
	}
	if len(l.Violation) == 5 {
		v := &schemas.CellViolation{Column: l.Violation[1], Pointer: l.Violation[3], Message: l.Violation[4]}
		v.Cell, _ = strconv.Atoi(l.Violation[0])
		v.Version, _ = strconv.Atoi(l.Violation[2])
		r.Violation = v
	}
	return r
}
