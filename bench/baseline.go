package bench

// The baselines of `schemaless bench` (--baseline): put and put-batch on the raft-noop target
// (raft without the SQL apply), on hashicorp/raft alone (raft-raw, rawraft.go), and the same
// inserts straight into MySQL with no datastore in between (baseline-mysql). They run in the same invocation as the targets, after them, so that
// the ratios in the table (setBaselineRatios) compare runs made on the same, possibly noisy,
// machine.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/storage"
)

// Values of --baseline, and the target of the mysql baseline's rows.
const (
	baselineMySQL       = "mysql"
	baselineRaftNoop    = "raft-noop"
	targetBaselineMySQL = "baseline-mysql"
)

// mysqlBaselineDropTimeout bounds dropping the mysql baseline's database, which happens even
// when the run's context has ended.
const mysqlBaselineDropTimeout = 60 * time.Second

// validateBaselines reports the values of --baseline that are unknown or repeated.
func validateBaselines(bs []string) error {
	var errs []error
	for i, b := range bs {
		switch {
		case b != baselineMySQL && b != baselineRaftNoop && b != baselineRaftRaw:
			errs = append(errs, fmt.Errorf("--baseline %q: want mysql, raft-noop or raft-raw", b))
		case slices.Contains(bs[:i], b):
			errs = append(errs, fmt.Errorf("--baseline %q: given twice", b))
		}
	}
	return errors.Join(errs...)
}

// runBaselines runs the baselines of f.Baselines for the put and put-batch workloads of
// f.Workloads, once per --rate (when given) and --clients value like the targets' runs, and
// returns their rows: the raft-noop target's (none when raft-noop is among --target, whose rows
// serve), and the mysql baseline's (target baseline-mysql). Other workloads are skipped with a
// note on stderr. It stops at the first baseline that fails to start.
func runBaselines(ctx context.Context, env *Env) ([]Result, error) {
	f := env.Config
	if len(f.Baselines) == 0 {
		return nil, nil
	}
	var ws, skipped []string
	for _, w := range f.Workloads {
		if isBaselineWorkload(w) {
			ws = append(ws, w)
		} else {
			skipped = append(skipped, w)
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(env.Stderr, "baselines %s: %s skipped (baselines run put and put-batch only)\n", strings.Join(f.Baselines, ", "), strings.Join(skipped, ", "))
	}
	if len(ws) == 0 {
		return nil, nil
	}
	fb := f
	fb.Workloads = ws
	var out []Result
	for _, b := range f.Baselines {
		envb := newEnv(fb, env.Stdout, env.Stderr, env.run)
		var rs []Result
		var err error
		switch b {
		case baselineRaftNoop:
			if slices.Contains(f.Targets, targetRaftNoop) {
				fmt.Fprintln(env.Stderr, "baseline raft-noop: the rows of --target raft-noop serve")
				continue
			}
			var t *clusterTarget
			if t, err = startTarget(ctx, targetRaftNoop, envb); err != nil {
				return out, fmt.Errorf("--baseline raft-noop: %w", err)
			}
			rs, err = runTarget(ctx, envb, t)
			_ = t.Close()
		case baselineMySQL:
			rs, err = runMySQLBaseline(ctx, envb)
		case baselineRaftRaw:
			var g *rawRaft
			logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
			if g, err = startRawRaft(ctx, fb.RaftLogStore, logger); err != nil {
				return out, fmt.Errorf("--baseline raft-raw: %w", err)
			}
			rs, err = runTarget(ctx, envb, g)
			err = errors.Join(err, g.Close())
		}
		out = append(out, rs...)
		if err != nil {
			return out, fmt.Errorf("--baseline %s: %w", b, err)
		}
	}
	return out, nil
}

// setBaselineRatios sets VsRaftRaw, VsRaftNoop and VsMySQL of every put and put-batch row of rs
// to its cells/s over that of the row with the same workload, clients and rate of the raft-raw
// baseline, the raft-noop target (of the same client too) and the mysql baseline, when that row
// exists and has a positive cells/s (the first one if several do). The baseline rows get no
// ratio to themselves (raft-noop rows do get VsRaftRaw and VsMySQL).
// Other rows, and rows with no matching baseline, are left alone.
func setBaselineRatios(rs []Result) {
	type key struct {
		workload      string
		clients, rate int
		client        string // of raft-noop's rows only: raft-raw and mysql have no HTTP client
	}
	raw, noop, my := map[key]float64{}, map[key]float64{}, map[key]float64{}
	for _, r := range rs {
		if !isBaselineWorkload(r.Workload) || r.CellsPerSec <= 0 {
			continue
		}
		k := key{r.Workload, r.Clients, r.Rate, ""}
		switch r.Target {
		case baselineRaftRaw:
			if _, ok := raw[k]; !ok {
				raw[k] = r.CellsPerSec
			}
		case baselineRaftNoop:
			k.client = r.Client
			if _, ok := noop[k]; !ok {
				noop[k] = r.CellsPerSec
			}
		case targetBaselineMySQL:
			if _, ok := my[k]; !ok {
				my[k] = r.CellsPerSec
			}
		}
	}
	for i := range rs {
		r := &rs[i]
		if !isBaselineWorkload(r.Workload) || r.Target == targetBaselineMySQL {
			continue
		}
		k := key{r.Workload, r.Clients, r.Rate, ""}
		if base, ok := raw[k]; ok && r.Target != baselineRaftRaw {
			r.VsRaftRaw = r.CellsPerSec / base
		}
		if base, ok := noop[key{r.Workload, r.Clients, r.Rate, r.Client}]; ok && r.Target != baselineRaftNoop && r.Target != baselineRaftRaw {
			r.VsRaftNoop = r.CellsPerSec / base
		}
		if base, ok := my[k]; ok {
			r.VsMySQL = r.CellsPerSec / base
		}
	}
}

// runMySQLBaseline runs the mysql baseline: env's put and put-batch workloads (others are
// ignored), once per --rate (when given) and --clients value, on a database of its own on the
// server at --mysql, created first and dropped at the end, even when a run or ctx fails.
func runMySQLBaseline(ctx context.Context, env *Env) (out []Result, err error) {
	b, err := openMySQLBaseline(ctx, env.Config.MySQLDSN)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	var ws []string
	for _, w := range env.Config.Workloads {
		if isBaselineWorkload(w) {
			ws = append(ws, w)
		}
	}
	envb := *env
	envb.Config.Workloads = ws
	return runTarget(ctx, &envb, b)
}

// mysqlBaseline is the mysql baseline's database, benchbase_<random>, holding one table shaped
// like the datastore's cell table: the target of the put and put-batch workloads' baseline
// (loadWorkload), named baseline-mysql, without the HTTP API. Its runs are sequential: run
// changes the pool's size.
type mysqlBaseline struct {
	db *sql.DB
	// database is the database's name (unquoted), table its cell table, qualified and quoted.
	database, table string
	// lastID is the last added_id inserted; the datastore assigns added_id itself too.
	lastID atomic.Int64
}

// openMySQLBaseline connects to the server at dsn (its database is ignored) and creates a new
// database benchbase_<8 hex digits> and its cell table. The connection settings mirror
// storage.OpenMySQL's (UTC, interpolated parameters). The caller must call Close, which drops
// the database.
func openMySQLBaseline(ctx context.Context, dsn string) (*mysqlBaseline, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("--mysql: %w", err)
	}
	mc.DBName = ""
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.InterpolateParams = true
	if mc.Params == nil {
		mc.Params = make(map[string]string)
	}
	mc.Params["time_zone"] = "'+00:00'"
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("--mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("connect to %s: %w", mc.Addr, err), db.Close())
	}
	name := fmt.Sprintf("benchbase_%08x", rand.Uint32())
	b := &mysqlBaseline{db: db, database: name, table: "`" + name + "`.`entity`"}
	for i, stmt := range baselineDDL(name) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			err = fmt.Errorf("create %s: %w", name, err)
			if i == 0 { // not created (it may even be someone else's): nothing to drop
				return nil, errors.Join(err, db.Close())
			}
			return nil, errors.Join(err, b.Close())
		}
	}
	return b, nil
}

// baselineDDL creates database name (failing if it exists: the baseline drops it at the end)
// and in it the table entity of a shard of the datastore's MySQL storage
// (storage.MySQLCellTableDDL).
func baselineDDL(name string) []string {
	return []string{
		"CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		storage.MySQLCellTableDDL(name),
	}
}

// baselineInsertSQL is one INSERT of n rows into table, as the datastore writes cells (mirrors
// insertSQL in storage/dialect.go: the columns of cellColumns, one placeholder tuple a row).
func baselineInsertSQL(table string, n int) string {
	const row = "(?, ?, ?, ?, ?, ?)"
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " (added_id, row_key, column_name, ref_key, body, created_at) VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// run runs workload (put or put-batch) with n clients at rate (0: closed loop) like the
// targets' runs (runLoad, f's warm-up, duration or ops, batch and value size) and returns its
// row, target baseline-mysql. The pool holds n connections, at most f.Connections when that is
// set, so that without it each client has a connection of its own; each request is one
// autocommitted INSERT (one transaction and commit) of 1 row (put) or f.Batch rows (put-batch).
// Unlike the datastore, it reads nothing before writing and keeps no applied index.
func (b *mysqlBaseline) run(ctx context.Context, workload string, n, rate int, f Config) Result {
	conns := n
	if f.Connections > 0 {
		conns = min(n, f.Connections)
	}
	b.db.SetMaxOpenConns(conns)
	b.db.SetMaxIdleConns(conns)
	rows := 1
	if workload == workloadPutBatch {
		rows = f.Batch
	}
	q := baselineInsertSQL(b.table, rows)
	r := runLoad(ctx, n, rate, f, func(ctx context.Context, rng *rand.Rand) (int, error) {
		args := make([]any, 0, 6*rows)
		now := time.Now().UTC().Truncate(time.Microsecond)
		for range rows {
			k := cellKey(uuid.New())
			args = append(args, b.lastID.Add(1), k.RowKey[:], k.ColumnKey, k.RefKey, []byte(benchBody(rng, f.ValueSize)), now)
		}
		_, err := b.db.ExecContext(ctx, q, args...)
		return rows, err
	})
	r.Target, r.Workload = targetBaselineMySQL, workload
	return r
}

// Name is baseline-mysql.
func (b *mysqlBaseline) Name() string { return targetBaselineMySQL }

// Endpoints is nil: the baseline has no HTTP API.
func (b *mysqlBaseline) Endpoints() []string { return nil }

// Close drops the database (within mysqlBaselineDropTimeout, whatever the runs' context) and
// closes the pool.
func (b *mysqlBaseline) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), mysqlBaselineDropTimeout)
	defer cancel()
	var err error
	if _, e := b.db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+b.database+"`"); e != nil {
		err = fmt.Errorf("drop database %s: %w", b.database, e)
	}
	return errors.Join(err, b.db.Close())
}
