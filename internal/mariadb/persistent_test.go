package mariadb_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/replication"
)

// probe returns the replication state of member m of cluster 0 of s.
func probe(t *testing.T, ctx context.Context, s *mariadb.ReplicatedSet, m int) replication.MemberStatus {
	t.Helper()
	db, err := replication.Open(s.AdminDSN(0, m))
	require.NoError(t, err)
	defer db.Close()
	st, err := replication.Probe(ctx, db, s.AdminDSN(0, m))
	require.NoError(t, err, "Probe(c0-m%d)", m)
	return st
}

// TestOpenReplicated opens a set in a directory (set up, marker written), kills its master and
// promotes a minion, stops it, and opens it again: the promoted member is the master again, the
// old one stays fenced, the data is there. It also checks Watch and the refusals.
func TestOpenReplicated(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "set")
	base := mariadbtest.FreePorts(t, 3)
	opts := mariadb.ReplicatedOptions{Clusters: 1, Minions: 2, Dir: dir, Ports: []int{base, base + 1, base + 2}}

	_, _, err := mariadb.OpenReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 1, Minions: 2, Dir: dir})
	assert.Error(t, err, "OpenReplicated with no fixed ports: want an error")
	_, _, err = mariadb.OpenReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 1, Minions: 2, Ports: opts.Ports})
	assert.Error(t, err, "OpenReplicated with no Dir: want an error")

	// An interrupted first start (data, no marker) is started over.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "c0-m0", "leftover"), 0o755))
	s, resumed, err := mariadb.OpenReplicated(ctx, opts)
	require.NoError(t, err, "OpenReplicated in a new directory")
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	assert.False(t, resumed, "OpenReplicated in a new directory: resumed")
	assert.NoDirExists(t, filepath.Join(dir, "c0-m0", "leftover"), "data of an interrupted first start")
	marker, err := os.ReadFile(filepath.Join(dir, mariadb.MarkerFile))
	require.NoError(t, err, "marker after the set-up")
	assert.Equal(t, "clusters 1 minions 2\n", string(marker), "marker")
	want, err := opts.DSNs()
	require.NoError(t, err)
	assert.Equal(t, want, s.DSNs(), "DSNs of the running set: want the options'")

	var mu sync.Mutex
	var exits [][2]int
	s.Watch(func(c, m int, _ *mariadb.Instance) {
		mu.Lock()
		exits = append(exits, [2]int{c, m})
		mu.Unlock()
	})
	_, err = open(t, s.DSN(0, 0)).Exec("CREATE DATABASE kept")
	require.NoError(t, err)
	require.NoError(t, s.WaitCaughtUp(ctx, 0))

	// Fail over: kill the master (from outside, as a crash), promote a minion.
	require.NoError(t, syscall.Kill(s.Instance(0, 0).Pid(), syscall.SIGKILL))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(exits) == 1
	}, 10*time.Second, 20*time.Millisecond, "Watch: want the killed master reported")
	mu.Lock()
	assert.Equal(t, [][2]int{{0, 0}}, exits, "Watch: the members reported")
	mu.Unlock()
	members := []string{s.AdminDSN(0, 0), s.AdminDSN(0, 1), s.AdminDSN(0, 2)}
	res, err := replication.Promote(ctx, members, replication.PromoteOptions{ReplUser: s.User()})
	require.NoError(t, err, "Promote after the kill")
	newMaster := 1
	if res.NewMaster == members[2] {
		newMaster = 2
	}
	require.Contains(t, members[1:], res.NewMaster, "Promote: want a minion promoted")
	err = s.Close()
	s = nil
	assert.ErrorIs(t, err, mariadb.ErrExited, "Close after the master was killed: want it reported")
	mu.Lock()
	assert.Len(t, exits, 1, "Watch after Close: want no exit reported for the stops")
	mu.Unlock()

	// Open again: the promoted member is the master, the old one fenced.
	s, resumed, err = mariadb.OpenReplicated(ctx, opts)
	require.NoError(t, err, "OpenReplicated on the stopped set")
	assert.True(t, resumed, "OpenReplicated on the stopped set: resumed")
	for m := range 3 {
		st := probe(t, ctx, s, m)
		switch {
		case m == newMaster:
			assert.True(t, st.IsMaster(), "c0-m%d (promoted) after the reopen: %+v, want master", m, st)
		case m == 0:
			assert.True(t, st.ReadOnly && !st.Replicating, "c0-m0 (old master) after the reopen: %+v, want fenced, replicating from nobody", st)
		default:
			assert.True(t, st.Replicating && st.MasterPort == s.Instance(0, newMaster).Port(),
				"c0-m%d after the reopen: %+v, want a minion of the promoted c0-m%d", m, st, newMaster)
		}
	}
	assert.Equal(t, 1, schemaCount(t, open(t, s.DSN(0, newMaster)), "kept"), "database kept on the master after the reopen")

	// A cluster whose members all replicate from nobody and are read-only has no master to
	// recover.
	for m := range 3 {
		admin := open(t, s.AdminDSN(0, m))
		for _, q := range []string{"SET GLOBAL read_only = 1", "STOP SLAVE", "RESET SLAVE ALL"} {
			_, err := admin.Exec(q)
			require.NoError(t, err, "c0-m%d: %s", m, q)
		}
	}
	require.NoError(t, s.Close(), "Close")
	s = nil
	_, _, err = mariadb.OpenReplicated(ctx, opts)
	assert.ErrorIs(t, err, mariadb.ErrNotResumable, "OpenReplicated with no member to make master")

	// Another shape; a member's data missing.
	_, _, err = mariadb.OpenReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 1, Minions: 1, Dir: dir, Ports: opts.Ports[:2]})
	assert.ErrorIs(t, err, mariadb.ErrNotResumable, "OpenReplicated with another shape")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "c0-m2")))
	_, _, err = mariadb.OpenReplicated(ctx, opts)
	assert.ErrorIs(t, err, mariadb.ErrNotResumable, "OpenReplicated with a member's data missing")
}
