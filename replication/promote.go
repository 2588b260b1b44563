package replication

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultCatchUp is PromoteOptions.CatchUp when it is zero.
const DefaultCatchUp = 10 * time.Second

// unfenceTimeout bounds the rollback of a failed switchover, which runs even when ctx has ended.
const unfenceTimeout = 10 * time.Second

// PromoteOptions configures Promote. The zero value is usable.
type PromoteOptions struct {
	// Domain is the GTID domain whose sequence numbers rank the minions (default 0).
	Domain uint32
	// CatchUp bounds the wait for the candidate to apply what it must before it is promoted
	// (default DefaultCatchUp, 10 s).
	CatchUp time.Duration
	// ReplUser and ReplPassword are the replication user the other members connect to the new
	// master as. Empty ReplUser: the user and password of the candidate's DSN.
	ReplUser, ReplPassword string
	// Logger receives one line per step; nil discards them.
	Logger *slog.Logger
}

// PromoteResult is what Promote did. DSNs are the members as given.
type PromoteResult struct {
	// NewMaster is the promoted member, "" if Promote failed before promoting.
	NewMaster string
	// OldMaster is the reachable master Promote fenced (a switchover), "" if none was reachable
	// (a failover).
	OldMaster string
	// OldMasterReachable reports whether a master was reachable (OldMaster != "").
	OldMasterReachable bool
	// CaughtUp reports whether the candidate applied, before its promotion, everything the old
	// master wrote (switchover) or everything it had received (failover). False after a
	// failover means the transactions it had received but not applied within CatchUp were
	// discarded (RESET SLAVE ALL), and so may be minions that applied more than it did.
	CaughtUp bool
	// Position is the new master's @@gtid_current_pos right after its promotion.
	Position string
	// Repointed are the members now replicating from the new master, in the order of members.
	Repointed []string
	// Skipped maps every other member to why it was left alone: "unreachable: ..." or
	// "repoint: ..." (a failed ConfigureMinion).
	Skipped map[string]string
}

// Promote makes one minion of a storage cluster its master and points the other members at it.
// members are the DSNs of the cluster's members, in any order, for an administrative user (see
// Privileges in the package documentation); their host and port must be how the members reach
// each other, since the candidate's become the MASTER_HOST and MASTER_PORT of the others.
//
// Steps:
//
//  1. Probe every member concurrently. Unreachable ones are skipped (PromoteResult.Skipped).
//     Two members with one server_id fail with ErrSameServer; two or more reachable masters
//     fail with ErrSplitBrain (naming them) and nothing is changed.
//  2. The candidate is the reachable minion (a member with a master configured) that received
//     the most: the highest SeqNo of its Gtid_IO_Pos in opts.Domain, ties to the lower index in
//     members. None: ErrNoCandidate. Members that are neither master nor minion (a fenced old
//     master after a restart) are never candidates but are repointed.
//  3. Switchover, a master is reachable: Fence it, then wait up to opts.CatchUp for the
//     candidate (its replication started if stopped) to apply the master's gtid_binlog_pos.
//     If it does not, the master is unfenced (read_only=0) and Promote fails with ErrCatchUp
//     without promoting.
//     Failover, no master is reachable: before step 2, wait until every minion's IO thread
//     stopped running (it drained what the dead master sent and tries to reconnect) or its
//     Gtid_IO_Pos held still for 300 ms (at most opts.CatchUp), so that the candidate is picked
//     on what each minion finally received; then wait up to opts.CatchUp for the candidate (its SQL
//     thread started if stopped) to apply its Gtid_IO_Pos. If it does not, Promote goes on and
//     reports CaughtUp false (and logs a warning): the unapplied rest is lost.
//  4. MakeMaster(candidate).
//  5. ConfigureMinion every other reachable member, old master included, with the candidate's
//     host and port and the replication user. A failure there does not fail Promote: it is
//     reported in Skipped.
//
// Promote blocks for the probes, up to opts.CatchUp for the catch-up, and the statements; ctx
// bounds all of it (a ctx ending during a failover's catch-up fails Promote, it does not
// promote). It is not atomic: an error after step 3 may leave the cluster without a master (the
// error says which step failed); probing again and rerunning Promote is safe.
func Promote(ctx context.Context, members []string, opts PromoteOptions) (PromoteResult, error) {
	res := PromoteResult{Skipped: map[string]string{}}
	if opts.CatchUp <= 0 {
		opts.CatchUp = DefaultCatchUp
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	// 1. Probe.
	dbs := make([]*sql.DB, len(members))
	sts := make([]MemberStatus, len(members))
	errs := make([]error, len(members))
	defer func() {
		for _, db := range dbs {
			if db != nil {
				db.Close()
			}
		}
	}()
	var wg sync.WaitGroup
	for i, dsn := range members {
		db, err := Open(dsn)
		if err != nil {
			errs[i] = err
			continue
		}
		dbs[i] = db
		wg.Go(func() { sts[i], errs[i] = Probe(ctx, db, dsn) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("replication: promote: probe: %w", err)
	}
	var masters, minions, reachable []int
	byID := map[uint32]int{}
	for i, dsn := range members {
		if errs[i] != nil {
			res.Skipped[dsn] = "unreachable: " + errs[i].Error()
			log.Warn("member unreachable", "member", redact(dsn), "err", errs[i])
			continue
		}
		st := sts[i]
		if j, dup := byID[st.ServerID]; dup {
			return res, fmt.Errorf("%w: %s and %s have server_id %d", ErrSameServer, redact(members[j]), redact(dsn), st.ServerID)
		}
		byID[st.ServerID] = i
		reachable = append(reachable, i)
		switch {
		case st.IsMaster():
			masters = append(masters, i)
		case st.Replicating:
			minions = append(minions, i)
		}
		log.Info("probed", "member", redact(dsn), "server_id", st.ServerID, "master", st.IsMaster(),
			"read_only", st.ReadOnly, "replicating", st.Replicating, "io_pos", st.GTIDIOPos, "slave_pos", st.GTIDSlavePos)
	}
	if len(masters) > 1 {
		return res, fmt.Errorf("%w: %s", ErrSplitBrain, addrs(members, masters))
	}
	if len(minions) == 0 {
		return res, fmt.Errorf("%w: %d of %d members reachable, %d master", ErrNoCandidate, len(reachable), len(members), len(masters))
	}

	// 2. Pick the candidate, on received positions that hold still when no master is reachable.
	if len(masters) == 0 {
		if err := settleReceived(ctx, log, members, dbs, minions, sts, opts.CatchUp); err != nil {
			return res, err
		}
	}
	c := minions[0]
	for _, i := range minions[1:] {
		if SeqNo(sts[i].GTIDIOPos, opts.Domain) > SeqNo(sts[c].GTIDIOPos, opts.Domain) {
			c = i
		}
	}
	cand, cdb := sts[c], dbs[c]
	host, port, user, password, err := masterAddr(members[c], opts)
	if err != nil {
		return res, err
	}
	log.Info("candidate", "member", redact(members[c]), "io_pos", cand.GTIDIOPos)

	// 3. Catch up.
	if len(masters) == 1 {
		if err := switchover(ctx, log, &res, members, dbs, masters[0], c, cand, opts.CatchUp); err != nil {
			return res, err
		}
	} else {
		if !cand.SQLRunning {
			if err := run(ctx, cdb, "promote: start the candidate's SQL thread", "START SLAVE SQL_THREAD"); err != nil {
				return res, err
			}
		}
		wctx, cancel := context.WithTimeout(ctx, opts.CatchUp)
		err := WaitApplied(wctx, cdb, cand.GTIDIOPos)
		cancel()
		switch {
		case err == nil:
			res.CaughtUp = true
		case ctx.Err() != nil:
			return res, fmt.Errorf("replication: promote: candidate catch-up: %w", err)
		default:
			log.Warn("no master reachable and the candidate did not apply what it received; promoting anyway",
				"member", redact(members[c]), "io_pos", cand.GTIDIOPos, "catch_up", opts.CatchUp, "err", err)
		}
	}

	// 4. Promote.
	if err := MakeMaster(ctx, cdb); err != nil {
		return res, fmt.Errorf("replication: promote %s (cluster may have no master now): %w", redact(members[c]), err)
	}
	res.NewMaster = members[c]
	if err := cdb.QueryRowContext(ctx, "SELECT @@gtid_current_pos").Scan(&res.Position); err != nil {
		log.Warn("read the new master's position", "member", redact(members[c]), "err", err)
	}
	log.Info("promoted", "member", redact(members[c]), "position", res.Position)

	// 5. Repoint the others.
	for _, i := range reachable {
		if i == c {
			continue
		}
		if err := ConfigureMinion(ctx, dbs[i], host, port, user, password); err != nil {
			res.Skipped[members[i]] = "repoint: " + err.Error()
			log.Warn("repoint", "member", redact(members[i]), "err", err)
			continue
		}
		res.Repointed = append(res.Repointed, members[i])
		log.Info("repointed", "member", redact(members[i]), "master", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return res, nil
}

// settleFor is how long, in a failover, every minion's received position must hold still before
// Promote picks the candidate; settlePoll how often it is read meanwhile.
const (
	settleFor  = 300 * time.Millisecond
	settlePoll = 50 * time.Millisecond
)

// settleReceived is the first half of a failover's step 2: with no master reachable, the IO
// threads of the minions may still be draining what the dead master sent before it died (a
// backlog they were catching up on), so a Gtid_IO_Pos read at once can be hundreds of
// transactions short. It reads the minions' status until each has settled, at most catchUp:
// its IO thread no longer runs (it reached the end of what the master sent and now tries to
// reconnect), or its Gtid_IO_Pos held still for settleFor (a master cut off rather than dead
// leaves the thread waiting). It leaves their final status in sts. It does not stop the IO
// threads: stopping both threads of a paused minion makes MariaDB discard its relay log at the
// next start, and with it what the minion received. Without it, a candidate picked on a stale
// position was caught up to that position only and promoted behind its own relay log, and a
// minion that had applied more could no longer replicate from it (error 1236).
func settleReceived(ctx context.Context, log *slog.Logger, members []string, dbs []*sql.DB, minions []int, sts []MemberStatus, catchUp time.Duration) error {
	deadline := time.Now().Add(catchUp)
	changed := make([]time.Time, len(members)) // when each minion's Gtid_IO_Pos last changed
	settled := func(i int) bool { return !sts[i].IORunning || time.Since(changed[i]) >= settleFor }
	now := time.Now()
	for _, i := range minions {
		changed[i] = now
	}
	for time.Now().Before(deadline) {
		pending := false
		for _, i := range minions {
			pending = pending || !settled(i)
		}
		if !pending {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replication: promote: wait for the received positions: %w", ctx.Err())
		case <-time.After(settlePoll):
		}
		for _, i := range minions {
			st, err := Probe(ctx, dbs[i], members[i])
			if err != nil {
				return fmt.Errorf("replication: promote: %w", err)
			}
			if st.GTIDIOPos != sts[i].GTIDIOPos {
				changed[i] = time.Now()
			}
			sts[i] = st
		}
	}
	for _, i := range minions {
		log.Info("received", "member", redact(members[i]), "io_pos", sts[i].GTIDIOPos, "io_running", sts[i].IORunning, "slave_pos", sts[i].GTIDSlavePos)
	}
	return nil
}

// switchover fences the reachable master m and waits for the candidate c to apply its binlog;
// on failure it unfences m.
func switchover(ctx context.Context, log *slog.Logger, res *PromoteResult, members []string, dbs []*sql.DB,
	m, c int, cand MemberStatus, catchUp time.Duration) error {
	res.OldMaster, res.OldMasterReachable = members[m], true
	log.Info("fencing the master", "member", redact(members[m]))
	if err := Fence(ctx, dbs[m]); err != nil {
		return fmt.Errorf("replication: promote: %w", err)
	}
	fail := func(err error) error {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unfenceTimeout)
		defer cancel()
		if uerr := run(uctx, dbs[m], "unfence", "SET GLOBAL read_only = 0"); uerr != nil {
			return fmt.Errorf("%w (and the master %s stays fenced: %w)", err, redact(members[m]), uerr)
		}
		log.Info("unfenced the master", "member", redact(members[m]))
		return err
	}
	var target string
	if err := dbs[m].QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&target); err != nil {
		return fail(fmt.Errorf("replication: promote: read the master's gtid_binlog_pos: %w", err))
	}
	if !cand.IORunning || !cand.SQLRunning {
		if err := ResumeReplication(ctx, dbs[c]); err != nil {
			return fail(fmt.Errorf("replication: promote: %w", err))
		}
	}
	wctx, cancel := context.WithTimeout(ctx, catchUp)
	err := WaitApplied(wctx, dbs[c], target)
	cancel()
	if err != nil {
		return fail(fmt.Errorf("%w: %s did not apply %s within %v: %w", ErrCatchUp, redact(members[c]), target, catchUp, err))
	}
	res.CaughtUp = true
	log.Info("candidate caught up", "member", redact(members[c]), "position", target)
	return nil
}

// masterAddr returns the host and port of the candidate's DSN and the replication credentials.
func masterAddr(dsn string, opts PromoteOptions) (host string, port int, user, password string, err error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", 0, "", "", fmt.Errorf("replication: promote: parse the candidate's DSN: %w", err)
	}
	if cfg.Net != "tcp" && cfg.Net != "tcp4" && cfg.Net != "tcp6" {
		return "", 0, "", "", fmt.Errorf("%w: the candidate's DSN uses %q, not TCP: the other members cannot reach it", ErrBadArgument, cfg.Net)
	}
	h, p, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return "", 0, "", "", fmt.Errorf("%w: the candidate's address %q: %w", ErrBadArgument, cfg.Addr, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil {
		return "", 0, "", "", fmt.Errorf("%w: the candidate's port %q: %w", ErrBadArgument, p, err)
	}
	user, password = opts.ReplUser, opts.ReplPassword
	if user == "" {
		user, password = cfg.User, cfg.Passwd
	}
	return h, port, user, password, nil
}

// addrs returns the addresses of members[idx...], comma separated.
func addrs(members []string, idx []int) string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = redact(members[i])
	}
	return strings.Join(out, ", ")
}
