package replication_test

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/replication"
)

// TestPromoteAfterKillMidStream kills the master while its minions are still receiving a
// stream of transactions (their IO threads drain what the dead master sent after the kill), and
// promotes at once; then again, with the new master. The new master must hold every transaction a minion
// received: a candidate picked and caught up on a received position read while the IO threads
// were still draining was promoted behind its own relay log, and the other minion, ahead of
// it, then failed to replicate from it (error 1236, diverged).
func TestPromoteAfterKillMidStream(t *testing.T) {
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	set, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 1, Minions: 3})
	require.NoError(t, err, "StartReplicated")
	t.Cleanup(func() { assert.NoError(t, set.Close(), "Close") })
	members := []string{set.AdminDSN(0, 0), set.AdminDSN(0, 1), set.AdminDSN(0, 2), set.AdminDSN(0, 3)}
	admin := make([]*sql.DB, len(members))
	for i := range members {
		admin[i] = open(t, members[i])
	}
	opts := replication.PromoteOptions{ReplUser: set.User(), Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))}
	master := 0
	dead := map[int]bool{}
	exec(t, open(t, set.DSN(0, master)), "CREATE DATABASE rt")
	exec(t, open(t, set.DSN(0, master)), "CREATE TABLE rt.kv (k INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200))")

	// Two rounds: among three minions, then among the two left.
	for round := range 2 {
		// The minions stop receiving while the master takes a backlog; they resume, and the
		// master dies while they stream it, so that part of it is still in their sockets and
		// relay logs when Promote probes them.
		db := open(t, set.DSN(0, master))
		for i := range members {
			if i != master && !dead[i] {
				exec(t, admin[i], "STOP SLAVE IO_THREAD")
			}
		}
		pad := string(make([]byte, 190))
		for range 3000 {
			exec(t, db, "INSERT INTO rt.kv (v) VALUES (?), (?), (?), (?), (?), (?), (?), (?)", pad, pad, pad, pad, pad, pad, pad, pad)
		}
		for i := range members {
			if i != master && !dead[i] {
				exec(t, admin[i], "START SLAVE IO_THREAD")
			}
		}
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, set.Instance(0, master).Kill(), "round %d: kill the master mid-stream", round)
		res, err := replication.Promote(ctx, members, opts)
		require.NoError(t, err, "round %d: Promote after the kill", round)
		require.NotEmpty(t, res.NewMaster, "round %d: a new master", round)
		next := -1
		for i, m := range members {
			if m == res.NewMaster {
				next = i
			}
		}
		newSeq := replication.SeqNo(res.Position, 0)
		// Every other running member replicates from the new master without error, and never
		// held more than the new master.
		for i := range members {
			if i == next || i == master || dead[i] {
				continue
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				st, err := replication.Probe(ctx, admin[i], members[i])
				require.NoError(c, err)
				assert.Empty(c, st.LastError, "round %d: m%d replicating from the new master m%d", round, i, next)
				assert.True(c, st.IORunning && st.SQLRunning, "round %d: m%d threads running: %+v", round, i, st)
			}, 10*time.Second, 100*time.Millisecond, "round %d: m%d follows the new master m%d (position %s)", round, i, next, res.Position)
			st, err := replication.Probe(ctx, admin[i], members[i])
			require.NoError(t, err)
			assert.LessOrEqual(t, replication.SeqNo(st.GTIDSlavePos, 0), newSeq, "round %d: m%d applied %s, past the new master's %s", round, i, st.GTIDSlavePos, res.Position)
		}
		dead[master] = true
		master = next
	}
}
