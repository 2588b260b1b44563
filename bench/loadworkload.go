package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
)

// loadWorkload is put (put_cell of one new cell per request), put-batch (put_cells of --batch
// new cells), get-latest (get_cell_latest of a random preloaded row, per --consistency),
// put-if (a conditional put_cell of a new row: if_latest_ref_key=none), transaction (a
// transaction of two new cells of one new row, conditional on the row's BASE column having no
// cell) or bank (transfers between benchBankAccounts accounts of one partition: a strong batch
// get of both accounts, then a transaction conditional on the two versions read; a transfer
// that lost a race answers 412 and counts as an error, so ops/s is the commit rate): one run
// per --rate (when given: open loop), --clients and --client value (go: package client; plain,
// for put, put-batch and get-latest only: plainClient), with runLoad. On the mysql and raft-raw
// baselines (directTarget), put and put-batch are the baseline's own requests; the other
// workloads do not apply to them.
type loadWorkload struct{ name string }

func (w loadWorkload) Name() string { return w.name }

// Run runs the workload on t. get-latest preloads --rows rows on its first run on a target.
func (w loadWorkload) Run(ctx context.Context, env *Env, t Target) ([]Result, error) {
	f := env.Config
	if b, ok := t.(directTarget); ok {
		if !isBaselineWorkload(w.name) {
			if !f.JSON {
				fmt.Fprintf(env.Stderr, "%s: %s does not apply to a baseline\n", t.Name(), w.name)
			}
			return nil, nil
		}
		return runDirect(ctx, env, b, w.name)
	}
	var out []Result
	auth := targetAuth(t)
	if w.name == workloadBank {
		cl, err := newClientConns(t.Endpoints(), 4, 0, auth)
		if err != nil {
			return nil, err
		}
		if env.rows, err = openAccounts(ctx, cl); err != nil {
			return nil, fmt.Errorf("%s: bank accounts: %w", t.Name(), err)
		}
	}
	consistencies := []string{""}
	if w.name == workloadGetLatest {
		consistencies = f.Consistency
		if env.rows == nil {
			rows, err := preload(ctx, t.Endpoints(), auth, f)
			if err != nil {
				return out, fmt.Errorf("%s: preload: %w", t.Name(), err)
			}
			env.rows = rows
		}
	}
	for _, cons := range consistencies {
		for _, rate := range loadRates(f) {
			for _, n := range f.Clients {
				for _, kind := range clientKinds(f) {
					op, err := loadOpOf(kind, w.name, cons, t.Endpoints(), auth, n, env.rows, f)
					if err != nil {
						return out, err
					}
					r := runLoad(ctx, n, rate, f, op)
					r.Target, r.Workload, r.Consistency = t.Name(), w.name, cons
					if namesClient(f) {
						r.Client = kind
					}
					if !f.JSON {
						fmt.Fprintln(env.Stderr, runLine(r))
					}
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}

// directTarget is a baseline without the HTTP API (baseline-mysql, raft-raw) that runs put and
// put-batch itself.
type directTarget interface {
	Target
	// run runs workload with n clients at rate (0: closed loop) with runLoad and returns its row.
	run(ctx context.Context, workload string, n, rate int, f Config) Result
}

// runDirect runs workload (put or put-batch) on t once per --rate (when given) and --clients
// value, printing each run's line on env.Stderr (not with --json), and stops when ctx ends.
func runDirect(ctx context.Context, env *Env, t directTarget, workload string) ([]Result, error) {
	f := env.Config
	var out []Result
	for _, rate := range loadRates(f) {
		for _, n := range f.Clients {
			r := t.run(ctx, workload, n, rate, f)
			if !f.JSON {
				fmt.Fprintln(env.Stderr, runLine(r))
			}
			out = append(out, r)
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
		}
	}
	return out, nil
}

// preload writes f.Rows rows (one BASE cell each, put_cells of 500) for the read workloads,
// with a client presenting auth.
func preload(ctx context.Context, endpoints []string, auth clientAuth, f Config) ([]uuid.UUID, error) {
	cl, err := newClientConns(endpoints, 8, 0, auth)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]uuid.UUID, f.Rows)
	for i := range rows {
		rows[i] = uuid.New()
	}
	for i := 0; i < len(rows); i += 500 {
		end := min(i+500, len(rows))
		ws := make([]client.CellWrite, 0, end-i)
		for _, r := range rows[i:end] {
			ws = append(ws, client.CellWrite{Key: cellKey(r), Body: benchBody(rng, f.ValueSize)})
		}
		if _, err := cl.PutCells(ctx, ws); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// loadOp does one request of workload with the Go client cl and returns the cells it wrote or
// read.
func loadOp(ctx context.Context, cl *client.Client, workload, consistency string, rows []uuid.UUID, rng *rand.Rand, f Config) (int, error) {
	switch workload {
	case workloadPut:
		k := cellKey(uuid.New())
		_, err := cl.PutCell(ctx, k.RowKey, k.ColumnKey, k.RefKey, benchBody(rng, f.ValueSize))
		return 1, err
	case workloadPutBatch:
		ws := make([]client.CellWrite, f.Batch)
		for i := range ws {
			ws[i] = client.CellWrite{Key: cellKey(uuid.New()), Body: benchBody(rng, f.ValueSize)}
		}
		_, err := cl.PutCells(ctx, ws)
		return f.Batch, err
	case workloadPutIf:
		k := cellKey(uuid.New())
		_, err := cl.PutCell(ctx, k.RowKey, k.ColumnKey, k.RefKey, benchBody(rng, f.ValueSize), client.IfNoCell())
		return 1, err
	case workloadTransaction:
		row := uuid.New()
		_, err := cl.Transact(ctx, []client.TxCondition{{RowKey: row, ColumnKey: "BASE"}}, []client.CellWrite{
			{Key: cellKey(row), Body: benchBody(rng, f.ValueSize)},
			{Key: cells.Key{RowKey: row, ColumnKey: "STATUS", RefKey: 1}, Body: json.RawMessage(`{"status":"booked"}`)},
		})
		return 2, err
	case workloadBank:
		return 2, transfer(ctx, cl, rows, rng)
	default:
		_, err := cl.GetCellLatest(ctx, rows[rng.IntN(len(rows))], "BASE", client.WithConsistency(consistency))
		return 1, err
	}
}

// benchBankAccounts is the number of accounts of the bank workload, all in one partition: the
// fewer, the more transfers race for the same versions.
const benchBankAccounts = 10

// openAccounts makes benchBankAccounts new accounts in one partition (RowKeysNear), each with a
// BALANCE of 1000 written if it has no cell, and returns their row keys.
func openAccounts(ctx context.Context, cl *client.Client) ([]uuid.UUID, error) {
	first := uuid.New()
	near, err := cl.RowKeysNear(ctx, first, benchBankAccounts-1)
	if err != nil {
		return nil, err
	}
	accounts := append([]uuid.UUID{first}, near...)
	for _, a := range accounts {
		if _, err := cl.PutCell(ctx, a, "BALANCE", 1, json.RawMessage(`{"balance":1000}`), client.IfNoCell()); err != nil {
			return nil, err
		}
	}
	return accounts, nil
}

// transfer moves a random amount between two random accounts: a strong batch get of both
// latest balances, then a transaction conditional on the two versions read.
func transfer(ctx context.Context, cl *client.Client, accounts []uuid.UUID, rng *rand.Rand) error {
	i := rng.IntN(len(accounts))
	j := (i + 1 + rng.IntN(len(accounts)-1)) % len(accounts)
	got, err := cl.GetCells(ctx, []client.GetKey{
		{RowKey: accounts[i], ColumnKey: "BALANCE", Latest: true},
		{RowKey: accounts[j], ColumnKey: "BALANCE", Latest: true},
	})
	if err != nil {
		return err
	}
	if len(got.Cells) != 2 {
		return fmt.Errorf("bank: read %d of 2 accounts", len(got.Cells))
	}
	var from, to struct{ Balance int }
	if err := json.Unmarshal(got.Cells[0].Body, &from); err != nil {
		return err
	}
	if err := json.Unmarshal(got.Cells[1].Body, &to); err != nil {
		return err
	}
	fromRef, toRef := got.Cells[0].RefKey, got.Cells[1].RefKey
	amount := min(1+rng.IntN(10), from.Balance)
	_, err = cl.Transact(ctx,
		[]client.TxCondition{{RowKey: accounts[i], ColumnKey: "BALANCE", LatestRefKey: &fromRef}, {RowKey: accounts[j], ColumnKey: "BALANCE", LatestRefKey: &toRef}},
		[]client.CellWrite{
			{Key: cells.Key{RowKey: accounts[i], ColumnKey: "BALANCE", RefKey: fromRef + 1}, Body: json.RawMessage(fmt.Sprintf(`{"balance":%d}`, from.Balance-amount))},
			{Key: cells.Key{RowKey: accounts[j], ColumnKey: "BALANCE", RefKey: toRef + 1}, Body: json.RawMessage(fmt.Sprintf(`{"balance":%d}`, to.Balance+amount))},
		})
	return err
}

// loadRates are the rates of the put, put-batch and get-latest runs: --rate's values when it
// was given (open loop), else only 0 (closed loop).
func loadRates(f Config) []int {
	if f.RateSet {
		return f.Rates
	}
	return []int{0}
}

// benchBody returns a JSON object of about size bytes.
func benchBody(rng *rand.Rand, size int) json.RawMessage {
	head := fmt.Sprintf(`{"origin":"SFO","destination":"JFK","distance":%d,"delay":%d,"pad":"`, rng.IntN(3000), rng.IntN(200)-20)
	pad := size - len(head) - 2
	if pad < 0 {
		pad = 0
	}
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 0, len(head)+pad+2)
	b = append(b, head...)
	for i := 0; i < pad; i++ {
		b = append(b, letters[rng.IntN(len(letters))])
	}
	return append(b, '"', '}')
}

// cellKey is the key of a benchmark cell: the row's BASE cell, ref key 1.
func cellKey(row uuid.UUID) cells.Key { return cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1} }
