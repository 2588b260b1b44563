package replication

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Timeouts Open puts in a DSN that does not set them.
const (
	// DefaultDialTimeout bounds connecting to a member (the DSN's timeout parameter).
	DefaultDialTimeout = 2 * time.Second
	// DefaultIOTimeout bounds each read and write of a connection (readTimeout, writeTimeout).
	DefaultIOTimeout = 10 * time.Second
	// waitSlice is the longest single MASTER_GTID_WAIT of WaitApplied: shorter than any sane
	// readTimeout, so a long wait is never cut by the driver.
	waitSlice = time.Second
)

// Errors of this package. Errors returned by the server are wrapped with the statement that
// failed (passwords left out).
var (
	// ErrNotApplied: WaitApplied's position was not applied before ctx ended.
	ErrNotApplied = errors.New("replication: position not applied in time")
	// ErrNoCandidate: Promote found no reachable minion (a member that replicates).
	ErrNoCandidate = errors.New("replication: no reachable minion to promote")
	// ErrSplitBrain: Promote found more than one reachable master and refused to act.
	ErrSplitBrain = errors.New("replication: more than one reachable master (split brain)")
	// ErrCatchUp: in a switchover, the candidate did not apply the old master's last transaction
	// within PromoteOptions.CatchUp; nothing was promoted and the old master was unfenced.
	ErrCatchUp = errors.New("replication: candidate did not catch up with the master")
	// ErrSameServer: two members of Promote are the same server (same server_id).
	ErrSameServer = errors.New("replication: two members are the same server")
	// ErrBadArgument: a host, user or password ConfigureMinion cannot quote safely (a backslash
	// or a control character), an empty host or user, or a port out of range.
	ErrBadArgument = errors.New("replication: bad argument")
)

// MemberStatus is what one probe of a member reports.
type MemberStatus struct {
	// DSN is the DSN given to Probe, as given.
	DSN string
	// ServerID is @@server_id.
	ServerID uint32
	// ReadOnly is @@read_only.
	ReadOnly bool
	// Replicating: SHOW SLAVE STATUS returns a row (a master is configured), whether or not its
	// threads run.
	Replicating bool
	// IORunning and SQLRunning: Slave_IO_Running and Slave_SQL_Running are "Yes" (an IO thread
	// still connecting is not running).
	IORunning  bool
	SQLRunning bool
	// MasterHost and MasterPort are the configured master ("" and 0 when not replicating).
	MasterHost string
	MasterPort int
	// GTIDBinlogPos is @@gtid_binlog_pos: the last GTID of each domain in the binary log.
	GTIDBinlogPos string
	// GTIDCurrentPos is @@gtid_current_pos: the last GTID written or applied, per domain.
	GTIDCurrentPos string
	// GTIDSlavePos is @@gtid_slave_pos: the last GTID applied by replication, per domain.
	GTIDSlavePos string
	// GTIDIOPos is Gtid_IO_Pos of SHOW SLAVE STATUS: the last GTID received from the master
	// ("" when not replicating).
	GTIDIOPos string
	// SecondsBehind is Seconds_Behind_Master, -1 when NULL (a thread stopped or not connected)
	// or not replicating.
	SecondsBehind int64
	// LastError is Last_IO_Error and Last_SQL_Error when set ("io: ...; sql: ..."), else "".
	// The server keeps an error until the thread restarts, so it may be stale.
	LastError string
}

// IsMaster reports whether the member is a master: writable and replicating from nobody.
func (s MemberStatus) IsMaster() bool { return !s.ReadOnly && !s.Replicating }

// Open returns a *sql.DB for administrative statements on the member at dsn, with a pool of 2
// connections and short timeouts: a dial timeout of 2 s and read and write timeouts of 10 s
// unless the DSN sets them. It does not connect; the only error is an unparsable DSN.
func Open(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("replication: parse DSN: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultDialTimeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultIOTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultIOTimeout
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("replication: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	return db, nil
}

// Probe reads the replication state of the member behind db (two queries). dsn is only copied
// into the result. It blocks for at most ctx and the connection's timeouts; any failure
// (unreachable, access denied) is returned wrapped.
func Probe(ctx context.Context, db *sql.DB, dsn string) (MemberStatus, error) {
	st := MemberStatus{DSN: dsn, SecondsBehind: -1}
	var readOnly int
	err := db.QueryRowContext(ctx, "SELECT @@server_id, @@read_only, @@gtid_binlog_pos, @@gtid_current_pos, @@gtid_slave_pos").
		Scan(&st.ServerID, &readOnly, &st.GTIDBinlogPos, &st.GTIDCurrentPos, &st.GTIDSlavePos)
	if err != nil {
		return st, fmt.Errorf("replication: probe %s: %w", redact(dsn), err)
	}
	st.ReadOnly = readOnly != 0
	row, err := slaveStatus(ctx, db)
	if err != nil {
		return st, fmt.Errorf("replication: probe %s: SHOW SLAVE STATUS: %w", redact(dsn), err)
	}
	if row == nil {
		return st, nil
	}
	st.Replicating = true
	st.IORunning = row["Slave_IO_Running"] == "Yes"
	st.SQLRunning = row["Slave_SQL_Running"] == "Yes"
	st.MasterHost = row["Master_Host"]
	st.MasterPort, _ = strconv.Atoi(row["Master_Port"])
	st.GTIDIOPos = row["Gtid_IO_Pos"]
	if v, ok := row["Seconds_Behind_Master"]; ok && v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			st.SecondsBehind = n
		}
	}
	var errs []string
	if e := row["Last_IO_Error"]; e != "" {
		errs = append(errs, "io: "+e)
	}
	if e := row["Last_SQL_Error"]; e != "" {
		errs = append(errs, "sql: "+e)
	}
	st.LastError = strings.Join(errs, "; ")
	return st, nil
}

// slaveStatus returns the row of SHOW SLAVE STATUS by column name (NULL as ""), or nil when
// the server replicates from nobody.
func slaveStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	row := make(map[string]string, len(cols))
	for i, c := range cols {
		row[c] = vals[i].String
	}
	return row, rows.Err()
}

// SeqNo returns the sequence number of domain in a GTID position list such as
// "0-1-123,1-2-5" (domain-server_id-seq_no, separated by commas and maybe spaces or
// newlines), or 0 when the domain is absent or its entry is malformed. Positions of one
// domain are compared by their SeqNo: sequence numbers grow across masters within a domain.
func SeqNo(pos string, domain uint32) uint64 {
	for _, gtid := range strings.Split(pos, ",") {
		parts := strings.Split(strings.TrimSpace(gtid), "-")
		if len(parts) != 3 {
			continue
		}
		d, err := strconv.ParseUint(parts[0], 10, 32)
		if err != nil || uint32(d) != domain {
			continue
		}
		if _, err := strconv.ParseUint(parts[1], 10, 32); err != nil {
			continue
		}
		seq, err := strconv.ParseUint(parts[2], 10, 64)
		if err != nil {
			return 0
		}
		return seq
	}
	return 0
}

// ConfigureMinion makes the member behind minion a read-only minion of the master at
// masterHost:masterPort, replicating as user/password (the address is the master's as the
// minion reaches it). It runs, stopping at the first error:
//
//	STOP SLAVE
//	SET GLOBAL read_only = 1
//	SET GLOBAL gtid_slave_pos = @@gtid_current_pos
//	CHANGE MASTER TO MASTER_HOST=..., MASTER_PORT=..., MASTER_USER=..., MASTER_PASSWORD=...,
//	    MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1
//	START SLAVE
//
// Setting gtid_slave_pos to gtid_current_pos lets an old master (whose own writes are in its
// binlog, not in its gtid_slave_pos) resume after its last transaction instead of from the
// beginning of the new master's binlog; on an ordinary minion the two are equal. Received but
// unapplied transactions (relay logs) are dropped and fetched again. It returns once START
// SLAVE returned, without waiting for the IO thread to connect: Probe shows the outcome.
// Bad arguments return ErrBadArgument before anything runs.
func ConfigureMinion(ctx context.Context, minion *sql.DB, masterHost string, masterPort int, user, password string) error {
	if masterHost == "" || user == "" || masterPort <= 0 || masterPort > 65535 {
		return fmt.Errorf("%w: master %q port %d user %q", ErrBadArgument, masterHost, masterPort, user)
	}
	host, err := quote(masterHost)
	if err != nil {
		return fmt.Errorf("%w: master host: %w", ErrBadArgument, err)
	}
	u, err := quote(user)
	if err != nil {
		return fmt.Errorf("%w: user: %w", ErrBadArgument, err)
	}
	p, err := quote(password)
	if err != nil {
		return fmt.Errorf("%w: password: %w", ErrBadArgument, err)
	}
	change := fmt.Sprintf("CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%d, MASTER_USER=%s, MASTER_PASSWORD=%%s, "+
		"MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", host, masterPort, u)
	steps := []struct{ shown, stmt string }{
		{"STOP SLAVE", "STOP SLAVE"},
		{"SET GLOBAL read_only = 1", "SET GLOBAL read_only = 1"},
		{"SET GLOBAL gtid_slave_pos = @@gtid_current_pos", "SET GLOBAL gtid_slave_pos = @@gtid_current_pos"},
		{fmt.Sprintf(change, "'...'"), fmt.Sprintf(change, p)},
		{"START SLAVE", "START SLAVE"},
	}
	for _, s := range steps {
		if _, err := minion.ExecContext(ctx, s.stmt); err != nil {
			return fmt.Errorf("replication: configure minion: %s: %w", s.shown, err)
		}
	}
	return nil
}

// quote returns s as a single-quoted SQL string literal. It refuses backslashes and control
// characters, whose escaping depends on the session's sql_mode (NO_BACKSLASH_ESCAPES).
func quote(s string) (string, error) {
	for _, r := range s {
		if r == '\\' || r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("%q holds a backslash or a control character", s)
		}
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'", nil
}

// MakeMaster makes the member behind db a master: STOP SLAVE; RESET SLAVE ALL (forgetting its
// master, its relay logs and any transaction received but not applied); SET GLOBAL read_only=0.
// It stops at the first error, which may leave the member replicating from nobody but still
// read-only. It does not check that the member is the only master: see Promote.
func MakeMaster(ctx context.Context, db *sql.DB) error {
	return run(ctx, db, "make master", "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0")
}

// Fence makes the member behind db read-only (SET GLOBAL read_only=1): users without READ_ONLY
// ADMIN can no longer write, replication still applies. The statement waits for running
// commits (and blocks behind long-running ones); ctx bounds the wait.
func Fence(ctx context.Context, db *sql.DB) error {
	return run(ctx, db, "fence", "SET GLOBAL read_only = 1")
}

// PauseReplication stops applying on the minion behind db (STOP SLAVE SQL_THREAD): its IO thread
// keeps receiving into the relay log, so Gtid_IO_Pos advances while gtid_slave_pos does not.
func PauseReplication(ctx context.Context, db *sql.DB) error {
	return run(ctx, db, "pause replication", "STOP SLAVE SQL_THREAD")
}

// ResumeReplication starts both replication threads of the minion behind db (START SLAVE; a
// no-op with a warning for threads already running).
func ResumeReplication(ctx context.Context, db *sql.DB) error {
	return run(ctx, db, "resume replication", "START SLAVE")
}

// run executes stmts in order on db, stopping at the first error.
func run(ctx context.Context, db *sql.DB, what string, stmts ...string) error {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("replication: %s: %s: %w", what, s, err)
		}
	}
	return nil
}

// WaitApplied blocks until the member behind db has applied the GTID position pos (its
// gtid_slave_pos reached pos in every domain of pos), using MASTER_GTID_WAIT in slices of at
// most 1 s so that no wait outlasts the connection's read timeout. It waits as long as ctx
// allows: without a deadline, until ctx is cancelled. An empty pos returns at once. When ctx
// ends first the error wraps ErrNotApplied and ctx's error; a position the server rejects
// (MASTER_GTID_WAIT returns NULL) or a failed query is returned wrapped.
func WaitApplied(ctx context.Context, db *sql.DB, pos string) error {
	for {
		slice := waitSlice
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 {
				return fmt.Errorf("%w: %s: %w", ErrNotApplied, pos, context.DeadlineExceeded)
			}
			slice = min(slice, left)
		}
		var r sql.NullInt64
		err := db.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, slice.Seconds()).Scan(&r)
		switch {
		case err == nil && r.Valid && r.Int64 == 0:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("%w: %s: %w", ErrNotApplied, pos, ctx.Err())
		case err != nil:
			return fmt.Errorf("replication: MASTER_GTID_WAIT(%q): %w", pos, err)
		case !r.Valid:
			return fmt.Errorf("replication: MASTER_GTID_WAIT(%q) returned NULL", pos)
		}
		// -1: this slice timed out; wait again while ctx allows.
	}
}

// redact returns the address of dsn ("host:port"), for error messages that must not quote a
// password; "<unparsable DSN>" when it does not parse.
func redact(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "<unparsable DSN>"
	}
	return cfg.Addr
}
