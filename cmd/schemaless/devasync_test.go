package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/schemaless-db/schemaless/workload"
)

// devAsyncFlights is how many flights the test imports: enough for every partition, triggers
// and the index, small enough for 2 cores.
const devAsyncFlights = 300

// buildSchemaless builds this command into a temporary directory.
func buildSchemaless(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "schemaless")
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return bin
}

// freePortRange returns the first of n consecutive ports of 127.0.0.1 that nobody listens on,
// outside the kernel's ephemeral range (mariadbtest.FreePorts): a port in that range, free when
// checked, can be taken by an outgoing connection of any process before dev's servers bind it.
func freePortRange(t *testing.T, n int) int {
	t.Helper()
	return mariadbtest.FreePorts(t, n)
}

// devProcess is a running `schemaless dev` and the lines it printed (stdout and stderr).
type devProcess struct {
	t     *testing.T
	cmd   *exec.Cmd
	done  chan struct{} // closed once the process exited; err is then set
	err   error
	mu    sync.Mutex
	lines []string
	more  chan struct{} // signalled on each new line
}

func startDev(t *testing.T, bin string, args ...string) *devProcess {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	p := &devProcess{t: t, cmd: exec.Command(bin, args...), done: make(chan struct{}), more: make(chan struct{}, 1)}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	require.NoError(t, p.cmd.Start(), "start dev")
	w.Close()
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
		r.Close()
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill() // its nodes and servers die with it
			<-p.done
		}
	})
	return p
}

func (p *devProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLine waits for a line starting with prefix and returns it; it fails the test when the
// process exits first or after timeout.
func (p *devProcess) waitLine(prefix string, timeout time.Duration) string {
	p.t.Helper()
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		for _, l := range p.lines {
			if strings.HasPrefix(l, prefix) {
				p.mu.Unlock()
				return l
			}
		}
		p.mu.Unlock()
		select {
		case <-p.more:
		case <-p.done:
			require.FailNow(p.t, "dev exited before printing the line", "want a line %q; dev exited (%v):\n%s", prefix, p.err, p.output())
		case <-deadline:
			require.FailNow(p.t, "dev did not print the line in time", "want a line %q within %v:\n%s", prefix, timeout, p.output())
		}
	}
}

// interrupt sends SIGINT and waits for a clean exit.
func (p *devProcess) interrupt(timeout time.Duration) {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-p.done:
	case <-time.After(timeout):
		require.FailNow(p.t, "dev still running after SIGINT", "want an exit within %v:\n%s", timeout, p.output())
	}
	require.NoError(p.t, p.err, "dev after SIGINT: want exit status 0:\n%s", p.output())
}

// mariadbdsUnder returns the pids of the running mariadbd processes whose data directory is
// under dir.
func mariadbdsUnder(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.HasSuffix(args[0], "mariadbd") || strings.HasSuffix(args[0], "mysqld") {
			if strings.Contains(string(cmdline), "--datadir="+dir) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// httpGet returns the status and body of a GET of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err, "GET %s", url)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// firstFlight returns the row key of the first flight of the test data.
func firstFlight(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	r, err := workload.NewReader(gz)
	require.NoError(t, err)
	fl, err := r.Next()
	require.NoError(t, err, "first flight of %s", path)
	return fl.RowKey().String()
}

// TestDevAsync runs `schemaless dev --mode async` as a process: a fresh start with an import,
// triggers and the index; a failover of cluster c0 with `admin promote` after its master is
// killed; a clean stop; then a restart on the same data, which makes the promoted member the
// master again and still serves every cell.
func TestDevAsync(t *testing.T) {
	mariadbtest.RequireServerBinary(t)
	start := time.Now()
	bin := buildSchemaless(t)
	t.Logf("built in %v", time.Since(start))
	dir := filepath.Join(t.TempDir(), "dev")
	t.Cleanup(func() { logNodeLogs(t, dir) })
	flights, err := filepath.Abs("../../testdata/flights-100k.csv.gz")
	require.NoError(t, err)
	airports, _ := filepath.Abs("../../testdata/airports.csv")
	// Every port dev's processes listen on, gossip included (TCP and UDP), in one checked range.
	base := freePortRange(t, 15)
	httpPort, raftPort, dbPort, gossipPort := base, base+3, base+6, base+12
	t.Logf("ports %d-%d", base, base+14)
	db := func(c, m int) string { return "127.0.0.1:" + strconv.Itoa(dbPort+c*3+m) }
	args := []string{"dev", "--mode", "async", "--data-dir", dir, "--http-port", strconv.Itoa(httpPort),
		"--raft-port", strconv.Itoa(raftPort), "--gossip-port", strconv.Itoa(gossipPort),
		"--mariadb-port", strconv.Itoa(dbPort), "--log-level", "warn"}
	api := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	row := firstFlight(t, flights)

	// 1. A fresh start with an import.
	run := time.Now()
	p := startDev(t, bin, append(args, "--fresh", "--import", flights, "--airports", airports,
		"--limit", strconv.Itoa(devAsyncFlights), "--quiet")...)
	// Generous limits: about 15 s on 2 idle cores, several times that on a loaded machine.
	ready := p.waitLine("ready: ", 3*time.Minute)
	assert.Contains(t, ready, "store mariadb, datastore trips (async, 64 shards, 4 partitions on 2 storage clusters)",
		"ready line: want the async datastore on 2 storage clusters")
	for _, want := range []string{
		fmt.Sprintf("  c0 (partitions 0,2): master %s, minions %s %s", db(0, 0), db(0, 1), db(0, 2)),
		fmt.Sprintf("  c1 (partitions 1,3): master %s, minions %s %s", db(1, 0), db(1, 1), db(1, 2)),
		"fail over: bin/schemaless admin promote --topology " + filepath.Join(dir, "topology.yaml") + " --datastore trips --cluster c0",
	} {
		p.waitLine(want, 5*time.Second)
	}
	p.waitLine("serving; Ctrl-C to stop", 3*time.Minute)
	t.Logf("fresh start and import of %d flights: %v", devAsyncFlights, time.Since(run))
	out := p.output()
	// A write retried after a timeout answers exists: created and exists add up to the flights.
	m := regexp.MustCompile(`imported (\d+) flights .*\((\d+) created, (\d+) exists, 0 conflicts\)`).FindStringSubmatch(out)
	assert.True(t, m != nil && m[1] == strconv.Itoa(devAsyncFlights) && atoi(m[2])+atoi(m[3]) == devAsyncFlights,
		"dev output: want a line imported %d flights (... created, ... exists, 0 conflicts) adding up:\n%s", devAsyncFlights, out)
	for _, want := range []string{
		fmt.Sprintf("read back %d cells (strong)", devAsyncFlights), "STATUS missing 0, wrong 0",
		"index flights_by_origin: every flight indexed",
	} {
		assert.Contains(t, out, want, "dev output: want a line with %q", want)
	}
	code, body := httpGet(t, api+"/v1/trips/cells/"+row+"/BASE")
	require.Equal(t, http.StatusOK, code, "GET the first flight: %s", body)
	require.Contains(t, body, `"origin"`, "GET the first flight: want its body")
	var cl wire.ClusterStatus
	_, body = httpGet(t, api+"/v1/cluster")
	assert.True(t, json.Unmarshal([]byte(body), &cl) == nil && len(cl.Datastores) == 1 && len(cl.Datastores[0].Partitions) == 4 &&
		cl.Datastores[0].Partitions[0].Cluster == "c0" && cl.Datastores[0].Partitions[0].Master == db(0, 0),
		"/v1/cluster: got %s, want partition 0 on c0 with master %s", body, db(0, 0))

	// 2. Fail c0 over: kill its master (a child of dev), promote.
	pidText, err := os.ReadFile(filepath.Join(dir, "mariadb", "c0-m0", "mysqld.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	require.NoError(t, err, "c0's master pid %q", pidText)
	require.Contains(t, mariadbdsUnder(t, dir), pid, "c0's master pid: want a mariadbd of %s", dir)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	p.waitLine("mariadb c0-m0 ("+db(0, 0)+") exited", 10*time.Second)
	promote, err := exec.Command(bin, "admin", "promote", "--topology", filepath.Join(dir, "topology.yaml"),
		"--datastore", "trips", "--cluster", "c0", "--json").Output()
	require.NoError(t, err, "admin promote: %s", promote)
	var pr replication.PromoteReport
	require.NoError(t, json.Unmarshal(promote, &pr), "admin promote --json: %s", promote)
	require.Contains(t, []string{db(0, 1), db(0, 2)}, pr.NewMaster, "admin promote: want a minion of c0 promoted: %s", promote)
	// A write on a partition of c0 (0 or 2: shards 0-15 and 32-47) goes to the new master once
	// the nodes see it (0.5 s).
	var note string
	for i := 0; note == ""; i++ {
		u := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("devasync", i)))
		if s := cells.ShardOf(u, 64); s < 16 || s >= 32 && s < 48 {
			note = u.String()
		}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		req, err := http.NewRequest(http.MethodPut, api+"/v1/trips/cells/"+note+"/NOTE/1", strings.NewReader(`{"after":"failover"}`))
		require.NoError(c, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(c, err, "PUT after the failover")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Contains(c, []int{http.StatusCreated, http.StatusOK, http.StatusAccepted}, resp.StatusCode,
			"PUT after the failover: %d %s, want 201, 200 or 202", resp.StatusCode, b)
		t.Logf("PUT after the failover: %d %s", resp.StatusCode, b)
	}, 20*time.Second, 200*time.Millisecond, "PUT after the failover: still failing after 20s")
	// A buffered write (the nodes had not seen the new master yet) becomes readable once a
	// node's reaper replayed it into the new master.
	written := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := http.Get(api + "/v1/trips/cells/" + note + "/NOTE")
		require.NoError(c, err, "GET the cell written after the failover")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(c, http.StatusOK, resp.StatusCode, "GET the cell written after the failover: %s", b)
	}, 30*time.Second, 200*time.Millisecond, "GET the cell written after the failover: still not 200 after 30s")
	t.Logf("the cell written after the failover is readable %v after its PUT answered", time.Since(written))
	stop := time.Now()
	p.interrupt(60 * time.Second)
	t.Logf("stopped in %v", time.Since(stop))
	require.Empty(t, mariadbdsUnder(t, dir), "mariadbd processes still running after dev stopped")

	// 3. A restart on the data: the promoted member is the master again; the old one stays fenced.
	run = time.Now()
	p = startDev(t, bin, args...)
	p.waitLine("storage: 2 MariaDB clusters of a master and 2 minions, restarted on their data", 3*time.Minute)
	other := db(0, 1)
	if pr.NewMaster == db(0, 1) {
		other = db(0, 2)
	}
	p.waitLine(fmt.Sprintf("  c0 (partitions 0,2): master %s, minions %s, neither %s", pr.NewMaster, other, db(0, 0)), 5*time.Second)
	p.waitLine("serving; Ctrl-C to stop", 2*time.Minute)
	t.Logf("restart: %v", time.Since(run))
	for _, path := range []string{"/v1/trips/cells/" + row + "/BASE", "/v1/trips/cells/" + note + "/NOTE"} {
		code, body := httpGet(t, api+path)
		assert.Equal(t, http.StatusOK, code, "GET %s after the restart: %s", path, body)
	}
	p.interrupt(60 * time.Second)
	require.Empty(t, mariadbdsUnder(t, dir), "mariadbd processes still running after dev stopped")
	assert.Contains(t, p.output(), "stopping", "dev output after SIGINT: want a line stopping")
}

// logNodeLogs logs the nodes' and triggers' logs of a dev in dir when the test failed, before
// the temporary directory goes.
func logNodeLogs(t *testing.T, dir string) {
	if !t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			t.Logf("--- %s:\n%s", l, b)
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
