package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// adminPartitions runs `admin partitions --json` and returns partition pid of trips.
func adminPartitions(t *testing.T, ctx context.Context, eps string, pid int) cluster.PartitionReport {
	t.Helper()
	out, errOut, err := runCmd(ctx, "admin", "partitions", "--endpoints", eps, "--datastore", "trips", "--json")
	if err != nil {
		t.Fatalf("admin partitions --json: %v\n%s", err, errOut)
	}
	var pr api.PartitionsResponse
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("admin partitions --json: %v in %q", err, out)
	}
	for _, p := range pr.Partitions {
		if p.Partition == pid {
			return p
		}
	}
	t.Fatalf("admin partitions: no partition %d in %s", pid, out)
	return cluster.PartitionReport{}
}

// replicaOf returns node's replica in p.
func replicaOf(p cluster.PartitionReport, node string) (cluster.ReplicaLag, bool) {
	for _, r := range p.Replicas {
		if r.Node == node {
			return r, true
		}
	}
	return cluster.ReplicaLag{}, false
}

// hasLine reports whether out has a line starting with these fields (separated by any spaces).
func hasLine(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= len(fields) && slices.Equal(f[:len(fields)], fields) {
			return true
		}
	}
	return false
}

// TestAdminRaftCommands drives the membership commands against a 3-node cluster with 2
// partitions: nodes, partitions, rebalance --dry-run, transfer-leader, remove-voter, drain
// --dry-run, move-replica, add-voter, and their errors.
func TestAdminRaftCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Partitions: 2})
	// A dead endpoint first: the commands pass over it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	eps := strings.Join(append([]string{dead}, c.URLs()...), ",")
	cl := testClient(t, c.URLs())
	for i := 0; i < 50; i++ {
		row := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("adminraft", i)))
		if _, err := cl.PutCell(ctx, row, "BASE", 1, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
			t.Fatalf("PutCell: %v", err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		start := time.Now()
		out, errOut, err := runCmd(ctx, append(append([]string{"admin"}, args...), "--endpoints", eps)...)
		if err != nil {
			t.Fatalf("admin %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		t.Logf("$ schemaless admin %s  (%s)\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out)
		return out
	}

	// nodes: 3, in a table and as JSON.
	out := run("nodes")
	for _, id := range []string{"n1", "n2", "n3"} {
		if !strings.Contains(out, "\n"+id+" ") {
			t.Errorf("admin nodes: no line for %s in\n%s", id, out)
		}
	}
	if !strings.Contains(out, "ID  STATE") || !strings.Contains(out, "REPLICAS  LEADERS") {
		t.Errorf("admin nodes: got\n%s\nwant a table with ID, STATE, ..., REPLICAS, LEADERS", out)
	}
	var nr api.NodesResponse
	if err := json.Unmarshal([]byte(run("nodes", "--json")), &nr); err != nil || len(nr.Nodes) != 3 || nr.Self == "" {
		t.Fatalf("admin nodes --json: got %+v (%v), want 3 nodes and self", nr, err)
	}

	// partitions: 2, each with a leader and 3 voters that are close behind.
	out = run("partitions")
	if strings.Count(out, "trips/") != 2 || strings.Count(out, " voter ") != 6 {
		t.Errorf("admin partitions: got\n%s\nwant trips/0 and trips/1 with 3 voters each", out)
	}
	for pid := 0; pid < 2; pid++ {
		p := adminPartitions(t, ctx, eps, pid)
		if p.Leader == "" || len(p.Voters()) != 3 || len(p.Replicas) != 3 {
			t.Fatalf("partition %d: got leader %q, voters %v, %d replicas; want a leader, 3 voters and replicas", pid, p.Leader, p.Voters(), len(p.Replicas))
		}
		for _, r := range p.Replicas {
			if !r.Reachable || r.Lag > 5 || r.State == "" {
				t.Errorf("partition %d, replica %+v: want reachable, a state, and a lag of at most 5", pid, r)
			}
		}
	}

	// rebalance --dry-run on a balanced cluster: no moves.
	out = run("rebalance", "--dry-run", "--json")
	var rep cluster.RebalanceReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.DryRun || len(rep.Moves) != 0 || len(rep.Nodes) != 3 {
		t.Fatalf("admin rebalance --dry-run: got %+v (%v), want a dry run over 3 nodes with no moves", rep, err)
	}
	if out := run("rebalance", "--dry-run"); !strings.Contains(out, "0 replica moves") || !hasLine(out, "n1", "2", "->", "2") {
		t.Errorf("admin rebalance --dry-run: got\n%s\nwant 0 replica moves and n1 at 2 -> 2 replicas", out)
	}

	// transfer-leader of trips/0 to a named non-leader.
	p0 := adminPartitions(t, ctx, eps, 0)
	target := "n2"
	if p0.Leader == "n2" {
		target = "n3"
	}
	other := "n3" // the follower to remove: neither n1 nor target
	if target == "n3" {
		other = "n2"
	}
	if out := run("transfer-leader", "--datastore", "trips", "--partition", "0", "--to", target); !strings.Contains(out, "trips/0 is led by "+target) {
		t.Errorf("admin transfer-leader: got\n%s\nwant trips/0 led by %s", out, target)
	}
	if p := adminPartitions(t, ctx, eps, 0); p.Leader != target {
		t.Fatalf("after transfer-leader --to %s: partitions shows leader %q", target, p.Leader)
	}

	// remove-voter of a follower: 2 voters left.
	if out := run("remove-voter", "--datastore", "trips", "--partition", "0", "--node", other); !strings.Contains(out, "no longer a replica") {
		t.Errorf("admin remove-voter: got\n%s", out)
	}
	p0 = adminPartitions(t, ctx, eps, 0)
	if v := p0.Voters(); len(v) != 2 || slices.Contains(v, other) {
		t.Fatalf("after remove-voter %s: voters %v, want 2 without it", other, v)
	}
	run("partitions", "--datastore", "trips")

	// drain --dry-run of n1: its trips/0 replica can go to the node just removed; its trips/1
	// replica has nowhere to go (every node holds one).
	out = run("drain", "--node", "n1", "--dry-run", "--json")
	rep = cluster.RebalanceReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("admin drain --json: %v in %q", err, out)
	}
	want := cluster.Move{Datastore: "trips", Partition: 0, From: "n1", To: other}
	if !rep.DryRun || !slices.Contains(rep.Moves, want) || len(rep.Moves) != 1 || rep.ReplicasAfter["n1"] != 1 || rep.LeadersAfter["n1"] != 0 {
		t.Fatalf("admin drain n1 --dry-run: got %+v, want a dry run moving %+v only, n1 left with 1 replica and no leadership", rep, want)
	}
	for _, tr := range rep.Transfers {
		if tr.To == "n1" {
			t.Errorf("admin drain n1 --dry-run: transfer %+v to the drained node", tr)
		}
	}
	if out := run("drain", "--node", "n1", "--dry-run"); !hasLine(out, "move", "trips/0", "n1", "->", other) || !strings.Contains(out, "n1 still holds 1 replica") {
		t.Errorf("admin drain --dry-run: got\n%s\nwant the move of trips/0 off n1 and a note about the replica left", out)
	}
	if v := adminPartitions(t, ctx, eps, 0).Voters(); len(v) != 2 {
		t.Fatalf("after drain --dry-run: voters %v, want still 2 (a dry run changes nothing)", v)
	}

	// move-replica n1 -> other, then add-voter n1 back: 3 voters, n1 caught up.
	if out := run("move-replica", "--datastore", "trips", "--partition", "0", "--from", "n1", "--to", other); !strings.Contains(out, "moved trips/0 from n1 to "+other) {
		t.Errorf("admin move-replica: got\n%s", out)
	}
	if v := adminPartitions(t, ctx, eps, 0).Voters(); len(v) != 2 || slices.Contains(v, "n1") || !slices.Contains(v, other) {
		t.Fatalf("after move-replica n1 -> %s: voters %v", other, v)
	}
	if out := run("add-voter", "--datastore", "trips", "--partition", "0", "--node", "n1"); !strings.Contains(out, "n1 is a voter of trips/0") {
		t.Errorf("admin add-voter: got\n%s", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := adminPartitions(t, ctx, eps, 0)
		r, ok := replicaOf(p, "n1")
		if len(p.Voters()) == 3 && ok && r.Suffrage == "voter" && r.Reachable && r.Lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after add-voter n1: voters %v, n1's replica %+v; want 3 voters and n1 caught up (lag 0)", p.Voters(), r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	run("partitions", "--datastore", "trips")
	run("partitions", "--datastore", "trips", "--json")
	var cfg cluster.PartitionConfig // adding a voter already there changes nothing
	if err := json.Unmarshal([]byte(run("add-voter", "--datastore", "trips", "--partition", "0", "--node", "n1", "--json")), &cfg); err != nil || len(cfg.Voters()) != 3 || cfg.Leader == "" {
		t.Errorf("admin add-voter --json of a voter: got %+v (%v), want the configuration with 3 voters", cfg, err)
	}
	if got, err := cl.GetCellLatest(ctx, uuid.NewSHA1(uuid.NameSpaceURL, []byte("adminraft7")), "BASE"); err != nil || string(got.Body) != `{"i":7}` {
		t.Errorf("a cell after the moves: got %+v (%v)", got, err)
	}

	// Errors: the API's message and field, a non-zero exit (an error from the command).
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"add-voter", "--datastore", "trips", "--partition", "0", "--node", "n9"}, []string{"404", `"n9"`, `field "node"`}},
		{[]string{"drain", "--node", "n9", "--dry-run"}, []string{"404", `"n9"`, `field "node"`}},
		{[]string{"transfer-leader", "--datastore", "trips", "--partition", "0", "--to", "n9"}, []string{"409", "n9 is not a voter"}},
		{[]string{"add-voter", "--datastore", "trips", "--partition", "-1", "--node", "n2"}, []string{"400", `"-1" is not a partition number`, `field "partition"`}},
		{[]string{"remove-voter", "--datastore", "trips", "--partition", "99", "--node", "n2"}, []string{"400", "no partition 99", `(field "`}},
		{[]string{"partitions", "--datastore", "nope"}, []string{"404", `"nope"`}},
		{[]string{"add-voter", "--datastore", "trips", "--node", "n2"}, []string{"--partition is required"}},
		{[]string{"move-replica", "--datastore", "trips", "--partition", "0", "--from", "n2"}, []string{"--from and --to are required"}},
	} {
		_, _, err := runCmd(ctx, append(append([]string{"admin"}, tc.args...), "--endpoints", eps)...)
		t.Logf("$ schemaless admin %s\nerror: %v", strings.Join(tc.args, " "), err)
		if err == nil {
			t.Errorf("admin %s: got no error, want %q", strings.Join(tc.args, " "), tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("admin %s: got %v, want it to contain %q", strings.Join(tc.args, " "), err, w)
			}
		}
	}
	if _, _, err := runCmd(ctx, "admin", "nodes", "--endpoints", dead, "--timeout", "5s"); err == nil || !strings.Contains(err.Error(), "no endpoint answered") {
		t.Errorf("admin nodes with no endpoint up: got %v, want no endpoint answered", err)
	}
}
