package examples

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// StatusSteps are the statuses the Docstore example advances a trip through, one conditional
// write each.
var StatusSteps = []string{"scheduled", "boarding", "departed", "airborne", "landed", "at_gate"}

// latestRef returns the latest ref key of a column (0 when it has no cell).
func latestRef(ctx context.Context, cl *client.Client, row uuid.UUID, col string) (int64, error) {
	c, err := cl.GetCellLatest(ctx, row, col)
	if errors.Is(err, client.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return c.RefKey, nil
}

// conditional writes body at ref key latest+1 of the column if its latest ref key is still
// latest (if it has no cell, for latest 0).
func conditional(ctx context.Context, cl *client.Client, row uuid.UUID, col string, latest int64, body string) error {
	cond := client.IfNoCell()
	if latest > 0 {
		cond = client.IfLatestRefKey(latest)
	}
	_, err := cl.PutCell(ctx, row, col, latest+1, json.RawMessage(body), cond)
	return err
}

// RaceStatus has two writers advance the FLIGHT_STATUS column of trip through StatusSteps at the
// same time, each step a compare-and-append: read the latest ref key, write the next one only
// if it is still the latest. Each step must be won by exactly one writer and the column must
// end with one version per step, in order, with no gap. It prints the outcome to out and
// returns an error when a check fails.
func RaceStatus(ctx context.Context, cl *client.Client, trip uuid.UUID, out io.Writer) error {
	start, err := latestRef(ctx, cl, trip, "FLIGHT_STATUS")
	if err != nil {
		return err
	}
	end := start + int64(len(StatusSteps))
	var (
		mu    sync.Mutex
		wins  = map[string]int{}
		lost  = map[string]int{}
		errs  []error
		wg    sync.WaitGroup
		names = []string{"A", "B"}
	)
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				latest, err := latestRef(ctx, cl, trip, "FLIGHT_STATUS")
				if err == nil && latest >= end {
					return
				}
				if err == nil {
					body := fmt.Sprintf(`{"status":%q,"by":%q}`, StatusSteps[latest-start], name)
					err = conditional(ctx, cl, trip, "FLIGHT_STATUS", latest, body)
				}
				mu.Lock()
				switch {
				case err == nil:
					wins[name]++
				case errors.Is(err, client.ErrPreconditionFailed):
					lost[name]++ // the other writer advanced it first: read again
				default:
					errs = append(errs, fmt.Errorf("writer %s: %w", name, err))
				}
				mu.Unlock()
				if err != nil && !errors.Is(err, client.ErrPreconditionFailed) {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	from := start + 1
	page, err := cl.GetVersions(ctx, trip, "FLIGHT_STATUS", &from, len(StatusSteps)+1, false)
	if err != nil {
		return err
	}
	var got []string
	for i, c := range page.Cells {
		var b struct{ Status, By string }
		if err := json.Unmarshal(c.Body, &b); err != nil {
			return err
		}
		if c.RefKey != from+int64(i) || b.Status != StatusSteps[i] {
			return fmt.Errorf("docstore: FLIGHT_STATUS version %d is %q at ref key %d, want %q at %d", i, b.Status, c.RefKey, StatusSteps[i], from+int64(i))
		}
		got = append(got, b.Status+"("+b.By+")")
	}
	if len(got) != len(StatusSteps) || wins["A"]+wins["B"] != len(StatusSteps) {
		return fmt.Errorf("docstore: %d FLIGHT_STATUS versions and %d wins for %d steps", len(got), wins["A"]+wins["B"], len(StatusSteps))
	}
	fmt.Fprintf(out, "docstore: trip %s FLIGHT_STATUS advanced by two competing writers with conditional writes: %s\n", trip, strings.Join(got, " -> "))
	fmt.Fprintf(out, "docstore:   writer A won %d steps and lost %d races (412), writer B won %d and lost %d; ref keys %d..%d, one per step, no gap: ok\n",
		wins["A"], lost["A"], wins["B"], lost["B"], from, end)
	return nil
}

// Book books a seat on trip and its payment in one partition transaction: the trip's BOOKING
// column (conditional on its latest ref key), a new seat row's HOLDER and a new payment row's
// PAYMENT, rows made in the trip's partition with RowKeysNear. A second booking conditional on
// the same version must fail and write nothing; a strong batch get must read all three cells
// at one applied index. It prints the outcome to out and returns an error when a check fails.
func Book(ctx context.Context, cl *client.Client, trip uuid.UUID, out io.Writer) error {
	near, err := cl.RowKeysNear(ctx, trip, 3)
	if err != nil {
		return err
	}
	seat, payment, payment2 := near[0], near[1], near[2]
	latest, err := latestRef(ctx, cl, trip, "BOOKING")
	if err != nil {
		return err
	}
	var cond *int64
	if latest > 0 {
		cond = &latest
	}
	book := func(pay uuid.UUID, cents int) (wire.TransactionResponse, error) {
		return cl.Transact(ctx,
			[]client.TxCondition{{RowKey: trip, ColumnKey: "BOOKING", LatestRefKey: cond}, {RowKey: seat, ColumnKey: "HOLDER"}},
			[]client.CellWrite{
				{Key: cells.Key{RowKey: trip, ColumnKey: "BOOKING", RefKey: latest + 1}, Body: json.RawMessage(fmt.Sprintf(`{"seat":%q,"payment":%q}`, seat, pay))},
				{Key: cells.Key{RowKey: seat, ColumnKey: "HOLDER", RefKey: 1}, Body: json.RawMessage(fmt.Sprintf(`{"trip":%q}`, trip))},
				{Key: cells.Key{RowKey: pay, ColumnKey: "PAYMENT", RefKey: 1}, Body: json.RawMessage(fmt.Sprintf(`{"trip":%q,"cents":%d}`, trip, cents))},
			})
	}
	res, err := book(payment, 12900)
	if err != nil {
		return fmt.Errorf("docstore: booking: %w", err)
	}
	_, err = book(payment2, 9900)
	var pe *client.PreconditionError
	if !errors.As(err, &pe) {
		return fmt.Errorf("docstore: a second booking of the same seat answered %v, want a precondition failure", err)
	}
	got, err := cl.GetCells(ctx, []client.GetKey{
		{RowKey: trip, ColumnKey: "BOOKING", Latest: true},
		{RowKey: seat, ColumnKey: "HOLDER", Latest: true},
		{RowKey: payment, ColumnKey: "PAYMENT", Latest: true},
		{RowKey: payment2, ColumnKey: "PAYMENT", Latest: true},
	})
	if err != nil {
		return err
	}
	if len(got.Cells) != 3 || len(got.Missing) != 1 || len(got.Snapshots) != 1 {
		return fmt.Errorf("docstore: read back %d cells, %d missing, %d snapshots; want the booking's 3, the refused payment missing, one snapshot", len(got.Cells), len(got.Missing), len(got.Snapshots))
	}
	fmt.Fprintf(out, "docstore: booked seat %s and payment %s with trip %s in one transaction (partition %d, added_ids %d, %d, %d)\n",
		seat, payment, trip, res.Partition, res.Results[0].AddedID, res.Results[1].AddedID, res.Results[2].AddedID)
	fmt.Fprintf(out, "docstore:   a second booking of the seat: refused (%s), its payment not written; the three cells read back in one snapshot (partition %d, index %d): ok\n",
		describe(pe.Failures), got.Snapshots[0].Partition, got.Snapshots[0].AppliedIndex)
	return nil
}

func describe(fs []wire.ConditionFailure) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		l := "no cell"
		if f.LatestRefKey != nil {
			l = fmt.Sprintf("latest ref key %d", *f.LatestRefKey)
		}
		parts[i] = fmt.Sprintf("condition %d: %s", f.Index, l)
	}
	return strings.Join(parts, ", ")
}
