package mariadb_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

func schemaCount(t *testing.T, db *sql.DB, name string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n))
	return n
}

func TestStartReplicatedBadOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, opts := range []mariadb.ReplicatedOptions{
		{Clusters: 1, Minions: 1, Hosts: []string{"127.0.0.1"}},
		{Clusters: 1, Minions: 1, Ports: []int{1, 2, 3}},
		{User: "bad'user"},
		{Minions: -1},
	} {
		s, err := mariadb.StartReplicated(ctx, opts)
		if !assert.Error(t, err, "StartReplicated(%+v): want an error", opts) {
			s.Close()
		}
	}
}

// TestReplicatedSet starts two clusters of a master and a minion in a given directory and checks
// they replicate independently, that the datastore's user is fenced on a minion, that a
// restarted minion comes back read-only on the same data and port and catches up, that
// DropPrefix drops on the master, and that Close reports a member that had exited.
func TestReplicatedSet(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 2, Minions: 1, Dir: dir})
	require.NoError(t, err, "StartReplicated")
	defer func() {
		if s != nil {
			s.Close()
		}
	}()

	ids := map[int]string{}
	for c := range 2 {
		for m := range 2 {
			inst := s.Instance(c, m)
			assert.Equal(t, filepath.Join(dir, fmt.Sprintf("c%d-m%d", c, m)), inst.DataDir(), "c%d-m%d DataDir", c, m)
			assert.Equal(t, "schemaless@tcp("+inst.Addr()+")/", s.DSN(c, m), "DSN(%d, %d)", c, m)
			var id int
			var ro bool
			require.NoError(t, open(t, s.DSN(c, m)).QueryRow("SELECT @@server_id, @@read_only").Scan(&id, &ro), "c%d-m%d as schemaless", c, m)
			prev, dup := ids[id]
			assert.False(t, dup, "c%d-m%d has server_id %d, like %s", c, m, id, prev)
			ids[id] = fmt.Sprintf("c%d-m%d", c, m)
			assert.Equal(t, m != 0, ro, "c%d-m%d read_only", c, m)
		}
	}
	assert.Equal(t, [][]string{{s.DSN(0, 0), s.DSN(0, 1)}, {s.DSN(1, 0), s.DSN(1, 1)}}, s.DSNs(), "DSNs: by cluster, member 0 first")

	// Each cluster replicates its own master only.
	for c := range 2 {
		master := open(t, s.DSN(c, 0))
		for _, q := range []string{
			fmt.Sprintf("CREATE DATABASE rs%d", c),
			fmt.Sprintf("CREATE TABLE rs%d.t (k INT PRIMARY KEY)", c),
			fmt.Sprintf("INSERT INTO rs%d.t VALUES (1), (2), (3)", c),
		} {
			_, err := master.Exec(q)
			require.NoError(t, err, "c%d master: %s", c, q)
		}
		require.NoError(t, s.WaitCaughtUp(ctx, c), "WaitCaughtUp(%d)", c)
	}
	for c := range 2 {
		minion := open(t, s.DSN(c, 1))
		assert.Equal(t, 1, schemaCount(t, minion, fmt.Sprintf("rs%d", c)), "c%d minion: count of database rs%d", c, c)
		assert.Equal(t, 0, schemaCount(t, minion, fmt.Sprintf("rs%d", 1-c)), "c%d minion: count of database rs%d of the other cluster", c, 1-c)
		_, err := minion.Exec(fmt.Sprintf("INSERT INTO rs%d.t VALUES (4)", c))
		assert.ErrorContains(t, err, "read-only", "insert on c%d's minion as schemaless", c)
	}

	// A restarted minion keeps its data and port, is read-only and catches up.
	assert.Error(t, s.Restart(ctx, 1, 1), "Restart of a running server: want an error")
	old := s.Instance(1, 1)
	require.NoError(t, old.Stop(), "Stop")
	_, err = open(t, s.DSN(1, 0)).Exec("INSERT INTO rs1.t VALUES (4), (5)")
	require.NoError(t, err)
	require.NoError(t, s.Restart(ctx, 1, 1), "Restart")
	inst := s.Instance(1, 1)
	assert.True(t, inst != old && inst.Port() == old.Port() && inst.DataDir() == old.DataDir(),
		"restarted c1-m1: port %d dir %s, want a new instance on port %d dir %s", inst.Port(), inst.DataDir(), old.Port(), old.DataDir())
	require.NoError(t, s.WaitCaughtUp(ctx, 1), "WaitCaughtUp after restart")
	restarted := open(t, s.DSN(1, 1))
	// Two queries: on MariaDB 10.11, SELECT COUNT(*), @@read_only FROM an InnoDB table reads
	// read_only as 0 on a read-only server.
	var n int
	var ro bool
	require.NoError(t, restarted.QueryRow("SELECT COUNT(*) FROM rs1.t").Scan(&n))
	require.NoError(t, restarted.QueryRow("SELECT @@read_only").Scan(&ro))
	assert.Equal(t, 5, n, "restarted minion: rows")
	assert.True(t, ro, "restarted minion: want read_only")

	// DropPrefix drops on the cluster's master, and the drop replicates.
	for _, q := range []string{"CREATE DATABASE dp_one", "CREATE DATABASE dp_two", "CREATE DATABASE dpx"} {
		_, err := open(t, s.DSN(1, 0)).Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, s.DropPrefix(ctx, 1, "dp"), "DropPrefix")
	require.NoError(t, s.WaitCaughtUp(ctx, 1), "WaitCaughtUp after DropPrefix")
	for m := range 2 {
		db := open(t, s.DSN(1, m))
		assert.Equal(t, 0, schemaCount(t, db, "dp_one")+schemaCount(t, db, "dp_two"), "c1-m%d: databases of prefix dp after DropPrefix", m)
		assert.Equal(t, 1, schemaCount(t, db, "dpx"), "c1-m%d: database dpx (not under dp_) after DropPrefix", m)
	}

	// Close reports the member that had exited by itself (killed from outside, as a crash).
	killed := s.Instance(0, 1)
	require.NoError(t, syscall.Kill(killed.Pid(), syscall.SIGKILL))
	<-killed.Done()
	insts := []*mariadb.Instance{s.Instance(0, 0), s.Instance(0, 1), s.Instance(1, 0), s.Instance(1, 1)}
	err = s.Close()
	s = nil
	var me *mariadb.MemberError
	if assert.ErrorAs(t, err, &me, "Close after a member was killed") {
		assert.Equal(t, [2]int{0, 1}, [2]int{me.Cluster, me.Member}, "Close: the member that had exited")
		assert.ErrorIs(t, err, mariadb.ErrExited, "Close after a member was killed")
	}
	for _, inst := range insts {
		select {
		case <-inst.Done():
		default:
			assert.Fail(t, "server still running after Close", "port %d", inst.Port())
		}
	}
	assert.DirExists(t, filepath.Join(dir, "c0-m0", "mysql"), "data of a given Dir after Close: want it kept")
}

// TestReplicatedSetTempDir: with no Dir, Close removes the directory StartReplicated made.
func TestReplicatedSetTempDir(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 1, Minions: 1})
	require.NoError(t, err, "StartReplicated")
	parent := filepath.Dir(s.Instance(0, 0).DataDir())
	require.NoError(t, open(t, s.DSN(0, 0)).Ping())
	assert.NoError(t, s.Close(), "Close")
	assert.NoDirExists(t, parent, "temporary directory after Close")
}
