package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
)

// BankWorkload checks partition transactions and snapshot reads: Accounts accounts, rows of one
// partition (the first row drawn from the run's seed, the others made by RowKeysNear), each a
// column Column of cells {"balance": n}; ref key 1 holds Initial, written at setup with IfNoCell.
// A step reads every account's latest cell with one strong batch get, which must be one snapshot
// of the partition ("read"); then, unless it stops there (ReadProbability), it moves 1 to
// MaxAmount (at most the balance read) from one account to another with one transaction
// ("transfer"): the two writes of the next ref keys, conditional on the two ref keys read.
// Check runs CheckBank on the history and on every account's versions read after the heal.
type BankWorkload struct {
	// Datastore, with Shards shards in Partitions partitions, holds the accounts in column
	// Column.
	Datastore          string
	Shards, Partitions int
	Column             string
	// Accounts is the number of accounts, Initial the balance of each at setup, MaxAmount the
	// largest transfer.
	Accounts           int
	Initial, MaxAmount int64
	// ReadProbability is the chance that a step is only a read.
	ReadProbability float64

	rows []uuid.UUID // the accounts, set by Setup
	cl   *client.Client
}

// NewBankWorkload returns the workload with its defaults: datastore "bank" of 8 shards in 2
// partitions, column BALANCE, 5 accounts of 100, transfers of 1 to 20, a third of the steps
// reads only.
func NewBankWorkload() *BankWorkload {
	return &BankWorkload{Datastore: "bank", Shards: 8, Partitions: 2, Column: "BALANCE", Accounts: 5, Initial: 100,
		MaxAmount: 20, ReadProbability: 0.3}
}

var _ SetupWorkload = (*BankWorkload)(nil)

// Name implements Workload.
func (w *BankWorkload) Name() string { return "bank" }

// Datastores implements Workload.
func (w *BankWorkload) Datastores() []topology.DatastoreSpec {
	// SplitLoad -1: the accounts' partition never splits by load (transfers span accounts, and
	// rows of different partitions cannot be in one transaction).
	return []topology.DatastoreSpec{{Name: w.Datastore, Mode: topology.ModeRaft, Shards: w.Shards, PartitionCount: w.Partitions, SplitLoad: -1}}
}

// NoSplitDatastores implements NoSplitWorkload: the accounts must stay in one partition, or
// the transfers between them would be refused as transactions across partitions.
func (w *BankWorkload) NoSplitDatastores() []string { return []string{w.Datastore} }

var _ NoSplitWorkload = (*BankWorkload)(nil)

// bankInit is Op.Extra of an "init" operation: the initial balance of an account, written at
// setup (ref key 1).
type bankInit struct {
	Account int   `json:"account"`
	Balance int64 `json:"balance"`
}

// bankRead is Op.Extra of an answered "read": per account (by index), the ref key and the
// balance read (ref key 0: no cell); the partitions the answer named a snapshot for; the cells
// that did not decode or were of no account, for people.
type bankRead struct {
	Refs       []int64  `json:"refs"`
	Balances   []int64  `json:"balances"`
	Partitions []int    `json:"partitions"`
	Bad        []string `json:"bad,omitempty"`
}

// bankTransfer is Op.Extra of a "transfer": Amount from account From to account To, conditional
// on the ref keys read (FromRef, ToRef) and writing FromRef+1 and ToRef+1 with the balances read
// minus and plus Amount. Results are the ref keys of a committed answer's results, in the order
// of the writes (from, to).
type bankTransfer struct {
	From        int     `json:"from"`
	To          int     `json:"to"`
	Amount      int64   `json:"amount"`
	FromRef     int64   `json:"from_ref"`
	ToRef       int64   `json:"to_ref"`
	FromBalance int64   `json:"from_balance"`
	ToBalance   int64   `json:"to_balance"`
	Results     []int64 `json:"results,omitempty"`
}

// balanceBody is an account cell's body.
func balanceBody(n int64) json.RawMessage { return fmt.Appendf(nil, `{"balance":%d}`, n) }

// parseBalance decodes an account cell's body.
func parseBalance(body []byte) (int64, error) {
	var b struct {
		Balance *int64 `json:"balance"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return 0, err
	}
	if b.Balance == nil {
		return 0, fmt.Errorf("no balance in %s", body)
	}
	return *b.Balance, nil
}

// Setup implements SetupWorkload: it makes the accounts' row keys (the first from the run's
// seed, the others by RowKeysNear, so all in its shard) and writes their initial balances with
// IfNoCell, retrying until each is stored; each is recorded as an "init" operation.
func (w *BankWorkload) Setup(ctx context.Context, env *StartEnv) error {
	var err error
	if w.cl, err = env.client(w.Datastore); err != nil {
		return err
	}
	first := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "jepsen-bank-%d", env.Seed))
	var near []uuid.UUID
	for near, err = w.cl.RowKeysNear(ctx, first, w.Accounts-1); err != nil; near, err = w.cl.RowKeysNear(ctx, first, w.Accounts-1) {
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return fmt.Errorf("jepsen: bank: row keys near %s: %w", first, err)
		}
	}
	w.rows = append([]uuid.UUID{first}, near...)
	h := env.History
	for i, row := range w.rows {
		body := balanceBody(w.Initial)
		op := h.Invoke(Op{Workload: "bank", F: "init", RowKey: row.String(), ColumnKey: w.Column, RefKey: 1, Body: string(body)})
		if err := w.initAccount(ctx, row, body); err != nil {
			return fmt.Errorf("jepsen: bank: account %d (%s): %w", i, row, err)
		}
		op.Outcome, op.Extra = OK, mustJSON(bankInit{Account: i, Balance: w.Initial})
		h.Complete(op)
	}
	env.Logger.Info("jepsen: bank accounts ready", "accounts", len(w.rows), "first", first)
	return nil
}

// initAccount writes ref key 1 of row with body if the column has no cell, until it is stored
// or ctx ends. A 412 is a success when the cell stored is this one (an earlier attempt).
func (w *BankWorkload) initAccount(ctx context.Context, row uuid.UUID, body json.RawMessage) error {
	for {
		_, err := w.cl.PutCell(ctx, row, w.Column, 1, body, client.IfNoCell())
		if errors.Is(err, client.ErrPreconditionFailed) {
			c, rerr := w.cl.GetCellLatest(ctx, row, w.Column, client.WithConsistency(client.ConsistencyStrong))
			if rerr == nil && c.RefKey == 1 && string(c.Body) == string(body) {
				return nil
			}
			return fmt.Errorf("the column holds another cell: %w", err)
		}
		if err == nil {
			return nil
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return err
		}
	}
}

// Stop implements SetupWorkload: nothing runs beside the workers.
func (w *BankWorkload) Stop() {}

// Step implements Workload: a read of every account, then, unless the step is a read only, a
// transfer between two of them based on it.
func (w *BankWorkload) Step(ctx context.Context, wk *Worker) {
	cl := wk.Client.WithDatastore(w.Datastore)
	r, ok := w.read(ctx, wk, cl)
	if !ok || wk.Rand.Float64() < w.ReadProbability {
		return
	}
	n := len(w.rows)
	from := wk.Rand.IntN(n)
	to := (from + 1 + wk.Rand.IntN(n-1)) % n
	if r.Balances[from] <= 0 {
		from, to = to, from
	}
	if r.Balances[from] <= 0 || r.Refs[from] == 0 || r.Refs[to] == 0 {
		return
	}
	t := bankTransfer{From: from, To: to, Amount: 1 + wk.Rand.Int64N(min(w.MaxAmount, r.Balances[from])),
		FromRef: r.Refs[from], ToRef: r.Refs[to], FromBalance: r.Balances[from], ToBalance: r.Balances[to]}
	conds := []client.TxCondition{
		{RowKey: w.rows[from], ColumnKey: w.Column, LatestRefKey: &t.FromRef},
		{RowKey: w.rows[to], ColumnKey: w.Column, LatestRefKey: &t.ToRef},
	}
	writes := []client.CellWrite{
		{Key: cells.Key{RowKey: w.rows[from], ColumnKey: w.Column, RefKey: t.FromRef + 1}, Body: balanceBody(t.FromBalance - t.Amount)},
		{Key: cells.Key{RowKey: w.rows[to], ColumnKey: w.Column, RefKey: t.ToRef + 1}, Body: balanceBody(t.ToBalance + t.Amount)},
	}
	h := wk.History
	op := h.Invoke(Op{Process: wk.Process, Node: wk.Node.ID, Workload: "bank", F: "transfer", ColumnKey: w.Column})
	tctx, cancel := context.WithTimeout(ctx, wk.OpTimeout)
	resp, err := cl.Transact(tctx, conds, writes)
	cancel()
	switch {
	case err == nil && resp.Committed:
		op.Outcome, op.Status = OK, "committed"
		for _, res := range resp.Results {
			t.Results = append(t.Results, res.RefKey)
		}
	case err == nil:
		op.Outcome, op.Status = OK, "not committed"
	case errors.Is(err, client.ErrPreconditionFailed):
		op.Outcome, op.Status = OK, "precondition_failed"
	case errors.Is(err, client.ErrConflict):
		op.Outcome, op.Status = OK, "conflict"
	case errors.Is(err, client.ErrInvalidArgument):
		op.Outcome, op.Status = OK, "invalid"
	default:
		op.Outcome = writeOutcome(err)
	}
	if err != nil {
		op.Error = err.Error()
	}
	op.Extra = mustJSON(t)
	h.Complete(op)
}

// read reads every account with one strong batch get and records it; ok is false when it got
// no answer.
func (w *BankWorkload) read(ctx context.Context, wk *Worker, cl *client.Client) (bankRead, bool) {
	keys := make([]client.GetKey, len(w.rows))
	index := make(map[string]int, len(w.rows))
	for i, row := range w.rows {
		keys[i] = client.GetKey{RowKey: row, ColumnKey: w.Column, Latest: true}
		index[row.String()] = i
	}
	h := wk.History
	op := h.Invoke(Op{Process: wk.Process, Node: wk.Node.ID, Workload: "bank", F: "read", ColumnKey: w.Column, Consistency: client.ConsistencyStrong})
	rctx, cancel := context.WithTimeout(ctx, wk.OpTimeout)
	resp, err := cl.GetCells(rctx, keys, client.WithConsistency(client.ConsistencyStrong))
	cancel()
	if err != nil {
		op.Outcome, op.Error = Info, err.Error()
		h.Complete(op)
		return bankRead{}, false
	}
	r := bankRead{Refs: make([]int64, len(w.rows)), Balances: make([]int64, len(w.rows))}
	for _, s := range resp.Snapshots {
		r.Partitions = append(r.Partitions, s.Partition)
	}
	for _, c := range resp.Cells {
		i, ok := index[c.RowKey]
		if !ok || c.ColumnKey != w.Column {
			r.Bad = append(r.Bad, fmt.Sprintf("cell %s/%s/%d of no account", c.RowKey, c.ColumnKey, c.RefKey))
			continue
		}
		b, err := parseBalance(c.Body)
		if err != nil {
			r.Bad = append(r.Bad, fmt.Sprintf("account %d ref key %d: body %s: %v", i, c.RefKey, c.Body, err))
			continue
		}
		r.Refs[i], r.Balances[i] = c.RefKey, b
	}
	op.Outcome, op.Extra = OK, mustJSON(r)
	h.Complete(op)
	return r, true
}

// Check implements Workload: CheckBank on the history and on every account's versions, read
// (strong) once the cluster has converged, and the replicas of the datastore compared. In async
// mode the failovers of the accounts' storage cluster excuse what a failover may hide or lose
// (see CheckBank).
func (w *BankWorkload) Check(ctx context.Context, env *CheckEnv, ops []Op) Verdict {
	v := Verdict{Workload: "bank", Valid: "yes"}
	var windows []Window
	if env.Storage != nil && len(w.rows) > 0 {
		windows = w.failoverWindows(env)
	}
	final, err := w.versions(ctx)
	if err != nil {
		v.Valid = "no"
		v.Violations = append(v.Violations, "reading the accounts' versions: "+err.Error())
	}
	res := CheckBank(ops, final, windows)
	v.Details = res
	if !res.Valid {
		v.Valid = "no"
		v.Violations = append(v.Violations, res.violationLines()...)
	}
	if diverged := compareDatastore(ctx, env, w.Datastore); len(diverged) > 0 {
		v.Valid = "no"
		v.Violations = append(v.Violations, diverged...)
	}
	return v
}

// failoverWindows returns the windows of the failovers of the storage cluster that holds the
// accounts' partition (async mode).
func (w *BankWorkload) failoverWindows(env *CheckEnv) []Window {
	ds, ok := env.Cluster.Topology().Datastore(w.Datastore)
	if !ok {
		return nil
	}
	p := ds.PartitionOf(cells.ShardOf(w.rows[0], ds.Shards))
	var out []Window
	for _, f := range env.Storage.Failovers() {
		if p != nil && fmt.Sprintf("c%d", f.Cluster) == p.Cluster && f.Error == "" {
			out = append(out, f.Window())
		}
	}
	return out
}

// versions reads every version of every account (strong reads), by account, in ref key order;
// nil when Setup did not make the accounts.
func (w *BankWorkload) versions(ctx context.Context) ([][]BankVersion, error) {
	if w.cl == nil {
		return nil, nil
	}
	out := make([][]BankVersion, len(w.rows))
	for i, row := range w.rows {
		var from *int64
		for {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			page, err := w.cl.GetVersions(rctx, row, w.Column, from, 1000, false, client.WithConsistency(client.ConsistencyStrong))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("account %d (%s): %w", i, row, err)
			}
			for _, c := range page.Cells {
				b, err := parseBalance(c.Body)
				if err != nil {
					return nil, fmt.Errorf("account %d (%s) ref key %d: %w", i, row, c.RefKey, err)
				}
				out[i] = append(out[i], BankVersion{Ref: c.RefKey, Balance: b})
			}
			if page.Next == nil {
				break
			}
			from = page.Next
		}
	}
	return out, nil
}

// mustJSON marshals v, which cannot fail for the workloads' plain structs.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
