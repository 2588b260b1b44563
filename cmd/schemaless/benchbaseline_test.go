package main

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/partition"
)

// baselineTestDSN returns the DSN of the MySQL/MariaDB server of the mysql baseline's tests:
// $SCHEMALESS_TEST_MYSQL_DSN, or root@tcp(127.0.0.1:3306)/. When it does not answer a ping
// within 2 s the test is skipped, or fails when CI=true.
func baselineTestDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(mariadbtest.EnvDSN)
	if dsn == "" {
		dsn = mariadbtest.LocalDSN
	}
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("DSN %q: %v", dsn, err)
	}
	mc.DBName = ""
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		if mariadbtest.InCI() {
			t.Fatalf("MySQL server %s does not answer (CI=true: not skipping): %v", mc.Addr, err)
		}
		t.Skipf("MySQL server %s does not answer: %v; set %s to run this test", mc.Addr, err, mariadbtest.EnvDSN)
	}
	return dsn
}

// TestBenchMySQLBaseline runs the mysql baseline's put and put-batch for --ops 200 with 2
// clients and checks the rows' counts, that the table holds exactly the rows written, and that
// the database is gone afterwards. It asserts no speed.
func TestBenchMySQLBaseline(t *testing.T) {
	dsn := baselineTestDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const ops, batch = 200, 10
	// No warm-up, so that every row written is a measured one.
	f := benchFlags{mysqlDSN: dsn, clients: []int{2}, ops: ops, duration: time.Hour, batch: batch, valueSize: 100}
	b, err := openMySQLBaseline(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = b.close()
		}
	}()
	var want int64
	for _, w := range []string{"put", "put-batch"} {
		r := b.run(ctx, w, 2, 0, f)
		t.Logf("%+v", r)
		cells := int64(1)
		if w == "put-batch" {
			cells = batch
		}
		if r.Target != targetBaselineMySQL || r.Workload != w || r.Clients != 2 {
			t.Errorf("%s: target %q, workload %q, clients %d: want %s, %s, 2", w, r.Target, r.Workload, r.Clients, targetBaselineMySQL, w)
		}
		if r.Ops != ops || r.Errors != 0 || r.Cells != ops*cells {
			t.Errorf("%s: got %d ops, %d cells, %d errors (first: %s), want %d, %d, 0", w, r.Ops, r.Cells, r.Errors, r.FirstError, ops, ops*cells)
		}
		if r.Seconds <= 0 || r.Seconds > 30 || r.P50 <= 0 || r.Max < r.P99 {
			t.Errorf("%s: %.3fs, p50 %dus, p99 %dus, max %dus: want 0 < seconds < 30 (not --duration), positive, ordered", w, r.Seconds, r.P50, r.P99, r.Max)
		}
		want += r.Cells
	}
	var rows, keys int64
	if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT row_key) FROM "+b.table).Scan(&rows, &keys); err != nil {
		t.Fatal(err)
	}
	if rows != want || keys != want {
		t.Errorf("table %s holds %d rows of %d row keys, want %d of as many", b.table, rows, keys, want)
	}
	closed = true
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	db := openTestDB(t, dsn)
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", b.database).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after close", b.database)
	}
}

// TestBenchMySQLBaselineWorkloads runs benchMySQLBaseline with a workload it does not have and
// checks that only put gets a row, once per --clients value, and that no benchbase database of
// its own is left.
func TestBenchMySQLBaselineWorkloads(t *testing.T) {
	dsn := baselineTestDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := openTestDB(t, dsn)
	before := baselineDatabases(ctx, t, db)
	f := benchFlags{mysqlDSN: dsn, workloads: []string{"get-latest", "put"}, clients: []int{1, 3}, ops: 30, duration: time.Hour,
		warmup: 50 * time.Millisecond, batch: 5, valueSize: 50, asJSON: true}
	rs, err := benchMySQLBaseline(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("got %d rows, want 2 (put with 1 and 3 clients): %+v", len(rs), rs)
	}
	for i, r := range rs {
		if r.Workload != "put" || r.Target != targetBaselineMySQL || r.Clients != f.clients[i] || r.Ops != 30 || r.Errors != 0 {
			t.Errorf("row %d: %s %s clients=%d, %d ops, %d errors (first: %s): want put %s clients=%d, 30 ops, 0 errors",
				i, r.Target, r.Workload, r.Clients, r.Ops, r.Errors, r.FirstError, targetBaselineMySQL, f.clients[i])
		}
	}
	for name := range baselineDatabases(ctx, t, db) {
		if !before[name] {
			t.Errorf("database %s left behind", name) // another bench on this server could create one too; unlikely in a test
		}
	}
}

// openTestDB opens the server of dsn with no database, closed when t ends.
func openTestDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mc.DBName = ""
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// baselineDatabases returns the names of the server's databases that start with benchbase_.
func baselineDatabases(ctx context.Context, t *testing.T, db *sql.DB) map[string]bool {
	t.Helper()
	rows, err := db.QueryContext(ctx, `SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'benchbase\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[n] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSetBaselineRatios(t *testing.T) {
	rs := []benchResult{
		{Target: "sqlite", Workload: "put", Clients: 1, CellsPerSec: 100},                    // 0: both baselines
		{Target: "sqlite", Workload: "put", Clients: 8, CellsPerSec: 300},                    // 1: noop only
		{Target: "sqlite", Workload: "put-batch", Clients: 1, CellsPerSec: 5000},             // 2: mysql only
		{Target: "sqlite", Workload: "put", Clients: 1, Rate: 50, CellsPerSec: 50},           // 3: open loop: its own baselines
		{Target: "sqlite", Workload: "get-latest", Clients: 1, CellsPerSec: 900},             // 4: no baselines
		{Target: "raft-noop", Workload: "put", Clients: 1, CellsPerSec: 400},                 // 5
		{Target: "raft-noop", Workload: "put", Clients: 8, CellsPerSec: 1200},                // 6
		{Target: "raft-noop", Workload: "put", Clients: 1, Rate: 50, CellsPerSec: 50},        // 7
		{Target: targetBaselineMySQL, Workload: "put", Clients: 1, CellsPerSec: 1000},        // 8
		{Target: targetBaselineMySQL, Workload: "put-batch", Clients: 1, CellsPerSec: 2e4},   // 9
		{Target: targetBaselineMySQL, Workload: "put", Clients: 1, Rate: 50, CellsPerSec: 0}, // 10: no cells: no ratio
		{Target: "raft-noop", Workload: "get-latest", Clients: 1, CellsPerSec: 9000},         // 11: not a baseline workload
	}
	setBaselineRatios(rs)
	want := []struct{ noop, my float64 }{
		{0.25, 0.1}, {0.25, 0}, {0, 0.25}, {1, 0}, {0, 0},
		{0, 0.4}, {0, 0}, {0, 0},
		{0, 0}, {0, 0}, {0, 0}, {0, 0},
	}
	for i, r := range rs {
		if r.VsRaftNoop != want[i].noop || r.VsMySQL != want[i].my {
			t.Errorf("row %d (%s %s clients=%d rate=%d): vs noop %v, vs mysql %v; want %v, %v",
				i, r.Target, r.Workload, r.Clients, r.Rate, r.VsRaftNoop, r.VsMySQL, want[i].noop, want[i].my)
		}
	}
}

func TestValidateBaselines(t *testing.T) {
	for _, ok := range [][]string{nil, {"mysql"}, {"raft-noop", "mysql"}} {
		if err := validateBaselines(ok); err != nil {
			t.Errorf("validateBaselines(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range [][]string{{"sqlite"}, {"mysql", "mysql"}, {""}} {
		if err := validateBaselines(bad); err == nil {
			t.Errorf("validateBaselines(%q) = nil, want an error", bad)
		}
	}
}

// TestRunLoadClosedOps checks that a closed-loop run with --ops ends after exactly that many
// measured requests, failed ones included, when --duration would last an hour.
func TestRunLoadClosedOps(t *testing.T) {
	var calls atomic.Int64
	errFail := errors.New("every seventh fails")
	op := func(ctx context.Context, _ *rand.Rand) (int, error) {
		if calls.Add(1)%7 == 0 {
			return 2, errFail
		}
		time.Sleep(100 * time.Microsecond)
		return 2, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a run ignoring --ops fails fast
	defer cancel()
	f := benchFlags{ops: 137, duration: time.Hour}
	r := runLoad(ctx, 3, 0, f, op)
	if r.Ops+r.Errors != 137 || r.Cells != 2*r.Ops || calls.Load() != 137 {
		t.Errorf("got %d ops + %d errors, %d cells, %d calls; want 137 in all, 2 cells per op, 137 calls (no warm-up)", r.Ops, r.Errors, r.Cells, calls.Load())
	}
	if r.Errors == 0 || r.FirstError != errFail.Error() {
		t.Errorf("got %d errors, first %q; want some, %q", r.Errors, r.FirstError, errFail)
	}
	if r.Seconds <= 0 || r.Seconds > 60 {
		t.Errorf("got %.3fs, want between 0 and 60 (ended by --ops, not --duration)", r.Seconds)
	}
}

// TestRunLoadOpenLoopLate runs an open loop at 200 requests/s with one client whose requests
// take 20 ms each (at most 50/s): nearly every request starts late, and the latencies, counted
// from the scheduled times, grow far beyond 20 ms (what a closed loop would show).
func TestRunLoadOpenLoopLate(t *testing.T) {
	op := func(ctx context.Context, _ *rand.Rand) (int, error) {
		time.Sleep(20 * time.Millisecond)
		return 1, nil
	}
	f := benchFlags{duration: 500 * time.Millisecond}
	r := runLoad(context.Background(), 1, 200, f, op)
	t.Logf("%+v", r)
	if r.Ops < 5 || r.Ops > 30 {
		t.Errorf("got %d ops, want 5..30 (a 20 ms request at a time for 0.5 s, plus the last one)", r.Ops)
	}
	if r.Late < 98 || r.Late > 100 {
		t.Errorf("got %d late, want 98..100: of the 100 requests due, all but the first found the client busy (sent late, or never)", r.Late)
	}
	if r.Max < 200_000 {
		t.Errorf("got max latency %d us, want over 200 ms (counted from the scheduled time)", r.Max)
	}
	if r.Rate != 200 || r.Clients != 1 {
		t.Errorf("got rate %d, clients %d; want 200, 1", r.Rate, r.Clients)
	}
}

// TestRunLoadOpenLoopRate runs an open loop at 200 requests/s for 1 s after a 200 ms warm-up
// with 8 clients whose requests take 1 ms (8,000/s at most): the run sends the 200 requests due
// in the measured second, no more, whatever this machine's load (a late scheduler catches up).
func TestRunLoadOpenLoopRate(t *testing.T) {
	var calls atomic.Int64
	op := func(ctx context.Context, _ *rand.Rand) (int, error) {
		calls.Add(1)
		time.Sleep(time.Millisecond)
		return 3, nil
	}
	f := benchFlags{warmup: 200 * time.Millisecond, duration: time.Second}
	r := runLoad(context.Background(), 8, 200, f, op)
	t.Logf("%+v", r)
	if r.Ops < 190 || r.Ops > 200 || r.OpsPerSec < 190 || r.OpsPerSec > 200 || r.Cells != 3*r.Ops || r.Seconds != 1 {
		t.Errorf("got %d ops, %d cells, %.1f ops/s over %.3fs; want 190..200 ops (3 cells each) and ops/s over 1 s", r.Ops, r.Cells, r.OpsPerSec, r.Seconds)
	}
	if c := calls.Load(); c < 230 || c > 240 {
		t.Errorf("got %d calls, want 230..240 (40 of the warm-up, then the measured ones)", c)
	}
	if r.P50 < 1000 {
		t.Errorf("got p50 %d us, want at least the 1 ms a request takes", r.P50)
	}
	if r.Late > 20 {
		t.Errorf("got %d late, want few: 8 clients of 1 ms requests are free when a request is due every 5 ms", r.Late)
	}
}

// TestBenchRaftNoopOpsAndRate runs put and put-batch on the raft-noop target: with --ops (closed
// and open loop) a run ends after exactly that many measured requests though --duration is an
// hour; at --rate 200 for 1 s, the run makes at most 200 requests/s, and not far fewer.
func TestBenchRaftNoopOpsAndRate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node raft cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := benchFlags{workloads: []string{"put"}, clients: []int{4}, warmup: 200 * time.Millisecond, duration: time.Hour,
		batch: 10, valueSize: 100, shards: 8, partitions: 2, inflight: partition.DefaultConfig().MaxInflight, asJSON: true}
	var repl replicatedServers
	defer repl.close()
	env, err := startTarget(ctx, "raft-noop", f, &repl)
	if err != nil {
		t.Fatal(err)
	}
	defer env.stop()
	cl, err := benchClientConns(env.endpoints, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ops", func(t *testing.T) {
		f := f
		f.ops = 60
		for _, tc := range []struct {
			workload string
			rate     int
		}{{"put", 0}, {"put-batch", 0}, {"put", 500}} {
			r := benchRunRate(ctx, cl, tc.workload, "", 4, tc.rate, nil, f)
			t.Logf("%+v", r)
			cells := int64(1)
			if tc.workload == "put-batch" {
				cells = 10
			}
			if r.Ops != 60 || r.Errors != 0 || r.Cells != 60*cells {
				t.Errorf("%s rate %d: got %d ops, %d cells, %d errors (first: %s); want 60, %d, 0",
					tc.workload, tc.rate, r.Ops, r.Cells, r.Errors, r.FirstError, 60*cells)
			}
			if r.Seconds <= 0 || r.Seconds > 60 {
				t.Errorf("%s rate %d: got %.3fs, want between 0 and 60 (ended by --ops)", tc.workload, tc.rate, r.Seconds)
			}
		}
	})
	t.Run("rate", func(t *testing.T) {
		f := f
		f.duration = time.Second
		cl, err := benchClient(env.endpoints, 32)
		if err != nil {
			t.Fatal(err)
		}
		r := benchRunRate(ctx, cl, "put", "", 32, 200, nil, f)
		t.Logf("%+v", r)
		if r.Rate != 200 || r.Errors != 0 {
			t.Errorf("got rate %d, %d errors (first: %s); want 200, 0", r.Rate, r.Errors, r.FirstError)
		}
		// 200 requests are due in the second; fewer are sent only when all 32 clients are busy,
		// which a loaded 2-core machine running the test with -race may make them: the lower
		// bound is loose (it catches a rate off by a unit), the upper one is not.
		if r.Ops < 40 || r.Ops > 200 || r.OpsPerSec < 40 || r.OpsPerSec > 200 {
			t.Errorf("got %d ops, %.1f ops/s; want 40..200 of each", r.Ops, r.OpsPerSec)
		}
	})
}
