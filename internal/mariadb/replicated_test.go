package mariadbtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartReplicatedBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, opts := range []ReplicatedOptions{
		{Clusters: 1, Minions: 1, Hosts: []string{"127.0.0.1"}},
		{Clusters: 1, Minions: 1, Ports: []int{1, 2, 3}},
		{User: "bad'user"},
		{Minions: -1},
	} {
		if s, err := StartReplicated(ctx, opts); err == nil {
			s.Close()
			t.Errorf("StartReplicated(%+v) = nil error, want one", opts)
		}
	}
}

// TestReplicatedSet starts two clusters of a master and a minion in a given directory and checks
// they replicate independently, that the datastore's user is fenced on a minion, and that a
// restarted minion comes back read-only on the same data and port and catches up.
func TestReplicatedSet(t *testing.T) {
	RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := StartReplicated(ctx, ReplicatedOptions{Clusters: 2, Minions: 1, Dir: dir})
	if err != nil {
		t.Fatalf("StartReplicated: %v", err)
	}
	defer func() {
		if s != nil {
			s.Close()
		}
	}()

	ids := map[int]string{}
	for c := range 2 {
		for m := range 2 {
			inst := s.Instance(c, m)
			if got, want := inst.DataDir(), filepath.Join(dir, fmt.Sprintf("c%d-m%d", c, m)); got != want {
				t.Errorf("c%d-m%d DataDir = %s, want %s", c, m, got, want)
			}
			if got, want := s.DSN(c, m), "schemaless@tcp("+inst.Addr()+")/"; got != want {
				t.Errorf("DSN(%d, %d) = %s, want %s", c, m, got, want)
			}
			var id int
			var ro bool
			if err := open(t, s.DSN(c, m)).QueryRow("SELECT @@server_id, @@read_only").Scan(&id, &ro); err != nil {
				t.Fatalf("c%d-m%d as schemaless: %v", c, m, err)
			}
			if prev, dup := ids[id]; dup {
				t.Errorf("c%d-m%d has server_id %d, like %s", c, m, id, prev)
			}
			ids[id] = fmt.Sprintf("c%d-m%d", c, m)
			if ro != (m != 0) {
				t.Errorf("c%d-m%d read_only = %v, want %v", c, m, ro, m != 0)
			}
		}
	}

	// Each cluster replicates its own master only.
	for c := range 2 {
		master := open(t, s.DSN(c, 0))
		for _, q := range []string{
			fmt.Sprintf("CREATE DATABASE rs%d", c),
			fmt.Sprintf("CREATE TABLE rs%d.t (k INT PRIMARY KEY)", c),
			fmt.Sprintf("INSERT INTO rs%d.t VALUES (1), (2), (3)", c),
		} {
			if _, err := master.Exec(q); err != nil {
				t.Fatalf("c%d master: %s: %v", c, q, err)
			}
		}
		if err := s.WaitCaughtUp(ctx, c); err != nil {
			t.Fatalf("WaitCaughtUp(%d): %v", c, err)
		}
	}
	for c := range 2 {
		minion := open(t, s.DSN(c, 1))
		if got := schemaCount(t, minion, fmt.Sprintf("rs%d", c)); got != 1 {
			t.Errorf("c%d minion: database rs%d count %d, want 1", c, c, got)
		}
		if got := schemaCount(t, minion, fmt.Sprintf("rs%d", 1-c)); got != 0 {
			t.Errorf("c%d minion: database rs%d of the other cluster count %d, want 0", c, 1-c, got)
		}
		if _, err := minion.Exec(fmt.Sprintf("INSERT INTO rs%d.t VALUES (4)", c)); err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("insert on c%d's minion as schemaless: got %v, want a read-only error", c, err)
		}
	}

	// A restarted minion keeps its data and port, is read-only and catches up.
	if err := s.Restart(ctx, 1, 1); err == nil {
		t.Error("Restart of a running server = nil error, want one")
	}
	old := s.Instance(1, 1)
	if err := old.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := open(t, s.DSN(1, 0)).Exec("INSERT INTO rs1.t VALUES (4), (5)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx, 1, 1); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	inst := s.Instance(1, 1)
	if inst == old || inst.Port() != old.Port() || inst.DataDir() != old.DataDir() {
		t.Errorf("restarted c1-m1: port %d dir %s, want a new instance on port %d dir %s", inst.Port(), inst.DataDir(), old.Port(), old.DataDir())
	}
	if err := s.WaitCaughtUp(ctx, 1); err != nil {
		t.Fatalf("WaitCaughtUp after restart: %v", err)
	}
	restarted := open(t, s.DSN(1, 1))
	// Two queries: on MariaDB 10.11, SELECT COUNT(*), @@read_only FROM an InnoDB table reads
	// read_only as 0 on a read-only server.
	var n int
	var ro bool
	if err := restarted.QueryRow("SELECT COUNT(*) FROM rs1.t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := restarted.QueryRow("SELECT @@read_only").Scan(&ro); err != nil {
		t.Fatal(err)
	}
	if n != 5 || !ro {
		t.Errorf("restarted minion: %d rows, read_only %v; want 5 rows, read_only", n, ro)
	}

	insts := []*Instance{s.Instance(0, 0), s.Instance(0, 1), s.Instance(1, 0), s.Instance(1, 1)}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	s = nil
	for _, inst := range insts {
		select {
		case <-inst.Done():
		default:
			t.Errorf("server on port %d still running after Close", inst.Port())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "c0-m0", "mysql")); err != nil {
		t.Errorf("data of a given Dir removed by Close: %v", err)
	}
}

// TestReplicatedSetTempDir: with no Dir, Close removes the directory StartReplicated made.
func TestReplicatedSetTempDir(t *testing.T) {
	RequireServerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := StartReplicated(ctx, ReplicatedOptions{Clusters: 1, Minions: 1})
	if err != nil {
		t.Fatalf("StartReplicated: %v", err)
	}
	parent := filepath.Dir(s.Instance(0, 0).DataDir())
	db := open(t, s.DSN(0, 0))
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s after Close: %v, want it gone", parent, err)
	}
}
