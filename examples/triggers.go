package examples

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// The example trigger groups: two consumer groups on the BASE cells of trips.
const (
	// GroupBilling is the group that writes a STATUS cell per BASE cell.
	GroupBilling = "billing"
	// GroupDelayCompensation is the group that writes a FARE_ADJUSTMENT cell per late flight.
	GroupDelayCompensation = "delay-compensation"
	// ColumnStatus is the column of the billing group's cell: {"state":"billed",...}.
	ColumnStatus = "STATUS"
	// ColumnFareAdjustment is the column of the delay-compensation group's credit.
	ColumnFareAdjustment = "FARE_ADJUSTMENT"
	// CompensationDelayMinutes: a flight that arrives more than this late gets a credit.
	CompensationDelayMinutes = 60
)

// FareCents is the fare of a flight of distanceMiles: $25 plus $0.11 a mile, in cents. Integer
// arithmetic, so the fare never depends on floating-point rounding.
func FareCents(distanceMiles int64) int64 { return 2500 + 11*distanceMiles }

// CreditCents is the credit of a flight that arrived delayMinutes late: $25 after more than 60
// minutes, $50 after more than 120, $100 after more than 180; 0 up to 60 minutes (or early).
func CreditCents(delayMinutes int64) int64 {
	switch {
	case delayMinutes > 180:
		return 10000
	case delayMinutes > 120:
		return 5000
	case delayMinutes > CompensationDelayMinutes:
		return 2500
	}
	return 0
}

// usd writes a non-negative amount of cents as a JSON number of dollars with two decimals.
func usd(cents int64) json.Number {
	return json.Number(fmt.Sprintf("%d.%02d", cents/100, cents%100))
}

// billingStatus is the body of the STATUS cell the billing group writes.
type billingStatus struct {
	State         string      `json:"state"`
	DistanceMiles int64       `json:"distance_miles"`
	FareCents     int64       `json:"fare_cents"`
	FareUSD       json.Number `json:"fare_usd"`
}

// fareAdjustment is the body of the FARE_ADJUSTMENT cell the delay-compensation group writes.
type fareAdjustment struct {
	Reason       string      `json:"reason"`
	DelayMinutes int64       `json:"delay_minutes"`
	CreditCents  int64       `json:"credit_cents"`
	CreditUSD    json.Number `json:"credit_usd"`
}

// BillingBody returns the STATUS body (JSON) for a trip's BASE body (as cells.Body.Object decodes
// it): {"state":"billed","distance_miles":d,"fare_cents":c,"fare_usd":c/100}. It fails when the
// distance is missing, not an integer or negative.
func BillingBody(base map[string]any) ([]byte, error) {
	d, err := intField(base, "distance")
	if err != nil {
		return nil, err
	}
	if d < 0 {
		return nil, fmt.Errorf("distance %d is negative", d)
	}
	c := FareCents(d)
	return json.Marshal(billingStatus{State: "billed", DistanceMiles: d, FareCents: c, FareUSD: usd(c)})
}

// CompensationBody returns the FARE_ADJUSTMENT body (JSON) for a trip's BASE body, and false when
// the flight arrived at most 60 minutes late or the body has no delay (no credit, nothing to
// write): {"reason":"arrival_delay","delay_minutes":d,"credit_cents":c,"credit_usd":c/100}. It
// fails when the delay is not an integer.
func CompensationBody(base map[string]any) ([]byte, bool, error) {
	if _, ok := base["delay"]; !ok {
		return nil, false, nil
	}
	d, err := intField(base, "delay")
	if err != nil {
		return nil, false, err
	}
	c := CreditCents(d)
	if c == 0 {
		return nil, false, nil
	}
	b, err := json.Marshal(fareAdjustment{Reason: "arrival_delay", DelayMinutes: d, CreditCents: c, CreditUSD: usd(c)})
	return b, err == nil, err
}

// intField reads an integer field of a decoded body.
func intField(obj map[string]any, name string) (int64, error) {
	v, ok := obj[name]
	if !ok {
		return 0, fmt.Errorf("body has no %q", name)
	}
	switch n := v.(type) {
	case int64:
		return n, nil
	case int:
		return int64(n), nil
	case int8:
		return int64(n), nil
	case int16:
		return int64(n), nil
	case int32:
		return int64(n), nil
	case uint8:
		return int64(n), nil
	case uint16:
		return int64(n), nil
	case uint32:
		return int64(n), nil
	case uint64:
		if n <= 1<<63-1 {
			return int64(n), nil
		}
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, nil
		}
	}
	return 0, fmt.Errorf("body field %q is %v (%T), not an integer", name, v, v)
}

// derivation computes the cell a trigger writes for a BASE body, or false for none.
type derivation func(base map[string]any) (body []byte, write bool, err error)

// Trigger is one example group: its handler, shared by its workers, and their counts. Its
// methods are safe for concurrent use.
type Trigger struct {
	// Group is the consumer group's name, Column the column its handler writes.
	Group, Column string

	derive derivation
	w      *CellBatcher

	delivered, retried, duplicates atomic.Int64
	created, exists, conflicts     atomic.Int64
	skipped                        atomic.Int64 // delivered cells that call for no write
	halted                         atomic.Bool  // the group halted and has not resumed

	mu          sync.Mutex
	handled     map[cells.Key]bool // BASE key -> its handler succeeded once
	first, last time.Time          // first and last delivery
}

// TriggerStats are a Trigger's counts: handler calls (Delivered; Duplicates for cells handled
// before, Retried for cells whose earlier call failed), the cells written (Created, Exists: a
// redelivery, Conflicts: a bug) and the deliveries that call for no write (Skipped); First and
// Last are the first and last delivery's times (zero before any).
type TriggerStats struct {
	Delivered, Retried, Duplicates int64
	Created, Exists, Conflicts     int64
	Skipped                        int64
	First, Last                    time.Time
}

// NewTriggers returns the example groups, billing then delay-compensation, whose handlers write
// through w.
func NewTriggers(w *CellBatcher) []*Trigger {
	return []*Trigger{
		{Group: GroupBilling, Column: ColumnStatus, w: w, handled: map[cells.Key]bool{},
			derive: func(base map[string]any) ([]byte, bool, error) {
				b, err := BillingBody(base)
				return b, err == nil, err
			}},
		{Group: GroupDelayCompensation, Column: ColumnFareAdjustment, w: w, handled: map[cells.Key]bool{},
			derive: CompensationBody},
	}
}

// Handle is the group's handler (a triggers.Handler): it counts the delivery and writes the
// derived cell under the BASE cell's row and ref key (see Write).
func (t *Trigger) Handle(ctx context.Context, c cells.Cell) error {
	t.delivery(c.Key)
	err := t.Write(ctx, c)
	if err == nil {
		t.mu.Lock()
		t.handled[c.Key] = true
		t.mu.Unlock()
	}
	return err
}

// Write writes the cell derived from the BASE cell c under its row and ref key, blocking until
// its batch is answered or ctx ends. "exists" (a redelivery) is success; "conflict" means the
// derivation is not deterministic, a bug: the error (wrapping client.ErrConflict) is retried by
// the group and the cell finally parked. A body it cannot derive from is an error too.
func (t *Trigger) Write(ctx context.Context, c cells.Cell) error {
	w, ok, err := t.derived(c)
	if err != nil {
		return err
	}
	if !ok {
		t.skipped.Add(1)
		return nil
	}
	res, err := t.w.Put(ctx, w)
	if err != nil {
		return fmt.Errorf("%s: %w", t.Group, err)
	}
	return t.count(w, res)
}

// HandlePage is the page handler of t's group (triggers.RunPages): it derives the cell of
// every cell of the page and writes them in one put_cells request. It fails without writing
// when a cell's body cannot be derived, and after writing when a cell conflicts; RunPages then
// hands the page's cells to Handle one by one, which writes the good ones again (answered
// exists) and parks the bad one.
func (t *Trigger) HandlePage(ctx context.Context, shard int, cs []cells.Cell) error {
	ws := make([]client.CellWrite, 0, len(cs))
	for _, c := range cs {
		t.delivery(c.Key)
		w, ok, err := t.derived(c)
		if err != nil {
			return err
		}
		if ok {
			ws = append(ws, w)
		}
	}
	if len(ws) > 0 {
		res, err := t.w.PutPage(ctx, ws)
		if err != nil {
			return fmt.Errorf("%s: shard %d: %w", t.Group, shard, err)
		}
		var conflict error
		for i, r := range res {
			if err := t.count(ws[i], r); err != nil {
				conflict = err
			}
		}
		if conflict != nil {
			return conflict
		}
	}
	t.skipped.Add(int64(len(cs) - len(ws)))
	t.mu.Lock()
	for _, c := range cs {
		t.handled[c.Key] = true
	}
	t.mu.Unlock()
	return nil
}

// derived returns the write t derives from the BASE cell c (its column, under c's row and ref
// key), and whether c calls for one; an error names the cell whose body it cannot derive from.
// A tombstone (an erased row, which a group reading BASE cells sees too) calls for none: the
// row's derived cells were erased with it.
func (t *Trigger) derived(c cells.Cell) (client.CellWrite, bool, error) {
	if c.Key.IsTombstone() {
		return client.CellWrite{}, false, nil
	}
	base, err := c.Body.Object()
	if err != nil {
		return client.CellWrite{}, false, fmt.Errorf("%s: %s: %w", t.Group, c.Key, err)
	}
	body, ok, err := t.derive(base)
	if err != nil {
		return client.CellWrite{}, false, fmt.Errorf("%s: %s: %w", t.Group, c.Key, err)
	}
	return client.CellWrite{Key: cells.Key{RowKey: c.RowKey, ColumnKey: t.Column, RefKey: c.RefKey}, Body: body}, ok, nil
}

// count counts the answer r to write w: created, exists, or conflict, which is an error wrapping
// client.ErrConflict.
func (t *Trigger) count(w client.CellWrite, r wire.PutResult) error {
	switch r.Status {
	case wire.StatusConflict:
		t.conflicts.Add(1)
		return fmt.Errorf("%s: %s holds another body than %s: %w", t.Group, w.Key, w.Body, client.ErrConflict)
	case wire.StatusCreated:
		t.created.Add(1)
	default:
		t.exists.Add(1)
	}
	return nil
}

// delivery counts one handler call: a duplicate when the cell was handled before, a retry when
// an earlier call for it failed.
func (t *Trigger) delivery(k cells.Key) {
	t.delivered.Add(1)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first.IsZero() {
		t.first = now
	}
	t.last = now
	ok, seen := t.handled[k]
	switch {
	case ok:
		t.duplicates.Add(1)
	case seen:
		t.retried.Add(1)
	default:
		t.handled[k] = false
	}
}

// Stats returns the counts so far.
func (t *Trigger) Stats() TriggerStats {
	t.mu.Lock()
	first, last := t.first, t.last
	t.mu.Unlock()
	return TriggerStats{
		Delivered: t.delivered.Load(), Retried: t.retried.Load(), Duplicates: t.duplicates.Load(),
		Created: t.created.Load(), Exists: t.exists.Load(), Conflicts: t.conflicts.Load(), Skipped: t.skipped.Load(),
		First: first, Last: last,
	}
}
