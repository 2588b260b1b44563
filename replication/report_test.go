package replication_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadb"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/replication"
)

func TestWithUser(t *testing.T) {
	t.Parallel()
	empty, secret := "", "s3cret"
	tests := []struct {
		dsn, user string
		password  *string
		want      string
	}{
		{"schemaless@tcp(10.0.0.1:3306)/", "root", nil, "root@tcp(10.0.0.1:3306)/"},
		{"schemaless:pw@tcp(10.0.0.1:3306)/?timeout=3s", "root", nil, "root:pw@tcp(10.0.0.1:3306)/?timeout=3s"},
		{"schemaless:pw@tcp(10.0.0.1:3306)/", "admin", &empty, "admin@tcp(10.0.0.1:3306)/"},
		{"schemaless@tcp(10.0.0.1:3306)/sl", "admin", &secret, "admin:s3cret@tcp(10.0.0.1:3306)/sl"},
	}
	for _, tt := range tests {
		got, err := replication.WithUser(tt.dsn, tt.user, tt.password)
		if assert.NoError(t, err, "WithUser(%q, %q, %v)", tt.dsn, tt.user, tt.password) {
			assert.Equal(t, tt.want, got, "WithUser(%q, %q, %v)", tt.dsn, tt.user, tt.password)
		}
	}
	_, err := replication.WithUser("pw:s3cret@tcp(10.0.0.1:3306", "root", nil)
	require.Error(t, err, "WithUser of a bad DSN")
	assert.NotContains(t, err.Error(), "s3cret", "the error must not quote the DSN")
}

func TestAddr(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "10.0.0.1:3306", replication.Addr("u:secret@tcp(10.0.0.1:3306)/db"))
	assert.Equal(t, "<unparsable DSN>", replication.Addr("u:secret@tcp(10.0.0.1"))
}

func TestReplicationState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    replication.MemberReport
		want string
	}{
		{replication.MemberReport{}, "no"},
		{replication.MemberReport{IORunning: true, SQLRunning: true}, "no"},
		{replication.MemberReport{Replicating: true, IORunning: true, SQLRunning: true}, "yes"},
		{replication.MemberReport{Replicating: true, IORunning: true}, "sql not running"},
		{replication.MemberReport{Replicating: true, SQLRunning: true}, "io not running"},
		{replication.MemberReport{Replicating: true}, "not running"},
	} {
		assert.Equal(t, tc.want, tc.m.ReplicationState(), "%+v", tc.m)
	}
}

func TestPromoteResultReport(t *testing.T) {
	t.Parallel()
	m := func(port string) string { return "root:pw@tcp(10.0.0.1:" + port + ")/" }
	res := replication.PromoteResult{NewMaster: m("2"), OldMaster: m("1"), OldMasterReachable: true, CaughtUp: true, Position: "0-2-9",
		Repointed: []string{m("1"), m("3")}, Skipped: map[string]string{m("4"): "unreachable: refused"}}
	got := res.Report("trips", "c0", errors.New("boom"))
	want := replication.PromoteReport{Datastore: "trips", Cluster: "c0", NewMaster: "10.0.0.1:2", OldMaster: "10.0.0.1:1", OldMasterReachable: true,
		CaughtUp: true, Position: "0-2-9", Repointed: []string{"10.0.0.1:1", "10.0.0.1:3"}, Skipped: map[string]string{"10.0.0.1:4": "unreachable: refused"},
		Error: "boom"}
	assert.Equal(t, want, got)

	empty := replication.PromoteResult{}.Report("trips", "c0", nil)
	assert.Equal(t, replication.PromoteReport{Datastore: "trips", Cluster: "c0", Repointed: []string{}, Skipped: map[string]string{}}, empty,
		"nothing promoted: empty addresses, empty (not nil) lists, no error")
}

// roles returns the members' roles in order, e.g. "master,minion".
func roles(r replication.ClusterReport) string {
	var s []string
	for _, m := range r.Members {
		s = append(s, m.Role)
	}
	return strings.Join(s, ",")
}

// TestProbeCluster probes a real master and minion and a member that does not answer, then
// the same cluster with the minion's IO thread stopped and with the master fenced.
func TestProbeCluster(t *testing.T) {
	t.Parallel()
	mariadbtest.RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	set, err := mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{Clusters: 1, Minions: 1})
	require.NoError(t, err, "StartReplicated")
	t.Cleanup(func() { assert.NoError(t, set.Close(), "Close") })
	master, minion := set.Instance(0, 0).Addr(), set.Instance(0, 1).Addr()
	members := []string{set.AdminDSN(0, 0), set.AdminDSN(0, 1)}

	r := replication.ProbeCluster(ctx, "trips", "c0", []int{0, 2}, members)
	require.Equal(t, "master,minion", roles(r), "roles in %+v", r)
	assert.Equal(t, "trips", r.Datastore)
	assert.Equal(t, "c0", r.Cluster)
	assert.Equal(t, []int{0, 2}, r.Partitions)
	assert.Equal(t, master, r.Master, "master in %+v", r)
	assert.Empty(t, r.Warnings, "warnings of a healthy cluster")
	assert.Equal(t, master, r.Members[0].Addr)
	assert.False(t, r.Members[0].ReadOnly, "the master is writable")
	assert.Equal(t, "no", r.Members[0].ReplicationState(), "the master replicates from nobody")
	mn := r.Members[1]
	assert.True(t, mn.Addr == minion && mn.MasterAddr == master && mn.ReadOnly && mn.ReplicationState() == "yes" && mn.SecondsBehind >= 0 && mn.ServerID != 0,
		"minion %+v: want read-only, replicating from %s with both threads running", mn, master)
	for _, m := range r.Members {
		assert.NotContains(t, m.Addr+m.MasterAddr+m.Error, "@", "a report names addresses, never DSNs: %+v", m)
	}

	// A member that does not answer is a row with an error, not a failure.
	down := "root@tcp(127.0.0.1:1)/?timeout=1s"
	r = replication.ProbeCluster(ctx, "trips", "c0", nil, append(members, down))
	require.Len(t, r.Members, 3)
	assert.Equal(t, "master,minion,unknown", roles(r))
	assert.NotEmpty(t, r.Members[2].Error, "the unreachable member's error")
	assert.Equal(t, int64(-1), r.Members[2].SecondsBehind)
	assert.Equal(t, []string{"127.0.0.1:1 is unreachable"}, r.Warnings)
	assert.NotNil(t, r.Partitions, "partitions: empty, not null, in JSON")

	// The minion stops receiving: a warning names the thread.
	admin, err := replication.Open(members[1])
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.ExecContext(ctx, "STOP SLAVE IO_THREAD")
	require.NoError(t, err)
	r = replication.ProbeCluster(ctx, "trips", "c0", nil, members)
	assert.Equal(t, "master,minion", roles(r), "a minion with a thread stopped is still a minion")
	assert.Equal(t, []string{minion + ": replication io not running"}, r.Warnings)

	// The master fenced: no master, and it is neither master nor minion.
	m0, err := replication.Open(members[0])
	require.NoError(t, err)
	defer m0.Close()
	require.NoError(t, replication.Fence(ctx, m0), "fence the master")
	r = replication.ProbeCluster(ctx, "trips", "c0", nil, members)
	assert.Equal(t, "unknown,minion", roles(r))
	assert.Empty(t, r.Master)
	require.Len(t, r.Warnings, 3, "warnings: %q", r.Warnings)
	assert.Contains(t, r.Warnings[0], "no master")
	assert.Contains(t, r.Warnings[1], master+" is read-only and replicates from nobody")
	assert.Equal(t, minion+": replication io not running", r.Warnings[2])

	// Two masters: split brain.
	require.NoError(t, replication.MakeMaster(ctx, m0), "unfence the old master")
	require.NoError(t, replication.MakeMaster(ctx, admin), "make the minion a master too")
	r = replication.ProbeCluster(ctx, "trips", "c0", nil, members)
	assert.Equal(t, "master,master", roles(r))
	assert.Empty(t, r.Master, "no one master with two")
	require.NotEmpty(t, r.Warnings)
	assert.Contains(t, r.Warnings[0], "2 masters ("+master+", "+minion+"): split brain")
}
