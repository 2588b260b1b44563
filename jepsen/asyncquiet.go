package jepsen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// quietFor is how long WaitQuiet wants the storage clusters to hold still: no buffered cell,
// and no transaction on any master.
const quietFor = time.Second

// WaitQuiet waits, after the traffic stopped and the faults healed, until the async datastores
// dss are quiet, and then until every minion replicating from its cluster's master has applied
// the master's position. Quiet means, for quietFor, in rounds 250 ms apart:
//
//   - every node reports every partition of dss with a master and an empty buffer
//     (buffer_depth 0);
//   - the buffer tables of dss on every storage cluster's master hold no row, read directly
//     (a node's depth is what its reaper last saw, and a cell may wait in a buffer that no
//     reaper read);
//   - no master's binary log moved (@@gtid_binlog_pos): nothing lands any more, neither a
//     reaper's replay nor a write still queued in a node after its client gave up.
//
// The checks read the replicas next; a cell landing between their reads would show as
// replicas that differ. It returns an error naming what did not settle when ctx ends first.
func (s *Storage) WaitQuiet(ctx context.Context, c *Cluster, dss []string) error {
	var (
		last     = "no round yet"
		since    time.Time // when the current quiet stretch began; zero when not quiet
		lastPos  []string
		prefixes []string
	)
	for _, name := range dss {
		if ds, ok := c.Topology().Datastore(name); ok {
			prefixes = append(prefixes, ds.MySQLPrefix)
		}
	}
	for {
		pos, err := s.quietRound(ctx, c, dss, prefixes)
		switch {
		case err != nil:
			since, last = time.Time{}, err.Error()
		case since.IsZero() || !slices.Equal(pos, lastPos):
			since, last = time.Now(), "the masters' binary logs still moved"
		case time.Since(since) >= quietFor:
			for cl := 0; cl < StorageClusters; cl++ {
				if err := s.waitCaughtUp(ctx, cl); err != nil {
					return fmt.Errorf("jepsen: cluster c%d did not settle: %w", cl, err)
				}
			}
			return nil
		}
		lastPos = pos
		select {
		case <-ctx.Done():
			return fmt.Errorf("jepsen: the async datastores did not quiet down: %w (last: %s)", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// quietRound is one round of WaitQuiet: an error naming what is not quiet yet, or the masters'
// binary log positions, by cluster.
func (s *Storage) quietRound(ctx context.Context, c *Cluster, dss, prefixes []string) ([]string, error) {
	for _, n := range c.Nodes {
		st, err := c.Status(ctx, n, 2*time.Second)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n.ID, err)
		}
		for _, d := range st.Datastores {
			if !slices.Contains(dss, d.Name) {
				continue
			}
			for _, p := range d.Partitions {
				if p.Master == "" {
					return nil, fmt.Errorf("%s sees no master for %s/%d", n.ID, d.Name, p.ID)
				}
				if p.BufferDepth > 0 {
					return nil, fmt.Errorf("%s sees %d buffered cells of %s/%d", n.ID, p.BufferDepth, d.Name, p.ID)
				}
			}
		}
	}
	pos := make([]string, StorageClusters)
	for cl := range StorageClusters {
		master, _ := s.Members(cl)
		p, n, err := s.masterState(ctx, cl, master, prefixes)
		if err != nil {
			return nil, fmt.Errorf("master %s: %w", s.Name(cl, master), err)
		}
		if n > 0 {
			return nil, fmt.Errorf("the buffer tables on %s hold %d rows", s.Name(cl, master), n)
		}
		pos[cl] = p
	}
	return pos, nil
}

// masterState reads, on one connection to member (c, m), its binary log position
// (@@gtid_binlog_pos) and the rows of the buffer tables of the datastores with MySQL prefixes
// prefixes. A buffer table not created yet counts as empty.
func (s *Storage) masterState(ctx context.Context, c, m int, prefixes []string) (string, int64, error) {
	db, err := s.admin(c, m)
	if err != nil {
		return "", 0, err
	}
	defer db.Close()
	var pos string
	if err := db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return "", 0, err
	}
	var total int64
	for _, p := range prefixes {
		var n int64
		q := "SELECT COUNT(*) FROM `" + strings.ReplaceAll(p, "`", "") + "_meta`.`buffer`"
		err := db.QueryRowContext(ctx, q).Scan(&n)
		var me *mysql.MySQLError
		switch {
		case errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049): // no such table, no such database
		case err != nil:
			return "", 0, fmt.Errorf("buffer of %s: %w", p, err)
		}
		total += n
	}
	return pos, total, nil
}
