package raftlog

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func entry(rng *rand.Rand, index uint64) *raft.Log {
	l := &raft.Log{Index: index, Term: 1 + index/7, Type: raft.LogType(rng.IntN(6))}
	if rng.IntN(4) > 0 {
		l.Data = make([]byte, rng.IntN(3000))
		for i := range l.Data {
			l.Data[i] = byte(rng.Uint32())
		}
	}
	if rng.IntN(3) == 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d", index))
	}
	if rng.IntN(2) == 0 {
		l.AppendedAt = time.Unix(0, rng.Int64N(1<<62))
	}
	return l
}

// TestEntries stores random entries of three groups, interleaved and in batches, reads every one
// back (also after reopening the store) and checks each group's bounds.
func TestEntries(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	dir := t.TempDir()
	s := openStore(t, dir)
	names := []string{"trips/0", "trips/1", "trips/10"}
	groups := map[string]*Group{}
	want := map[string][]*raft.Log{}
	for _, n := range names {
		g, err := s.Group(n)
		require.NoError(t, err)
		groups[n] = g
	}
	for round := 0; round < 60; round++ {
		n := names[rng.IntN(len(names))]
		next := uint64(len(want[n]) + 1)
		var batch []*raft.Log
		for i := 0; i < 1+rng.IntN(5); i++ {
			batch = append(batch, entry(rng, next+uint64(i)))
		}
		require.NoError(t, groups[n].StoreLogs(batch))
		want[n] = append(want[n], batch...)
	}
	check := func(s *Store, groups map[string]*Group) {
		for _, n := range names {
			g := groups[n]
			first, err := g.FirstIndex()
			require.NoError(t, err)
			last, err := g.LastIndex()
			require.NoError(t, err)
			if len(want[n]) == 0 {
				assert.Zero(t, first+last, n)
				continue
			}
			assert.Equal(t, uint64(1), first, n)
			assert.Equal(t, uint64(len(want[n])), last, n)
			for _, w := range want[n] {
				var got raft.Log
				require.NoError(t, g.GetLog(w.Index, &got))
				assert.Equal(t, w.Term, got.Term, "%s %d term", n, w.Index)
				assert.Equal(t, w.Type, got.Type)
				assert.Equal(t, w.Index, got.Index)
				assert.Equal(t, len(w.Data), len(got.Data))
				assert.Equal(t, string(w.Data), string(got.Data), "%s %d data", n, w.Index)
				assert.Equal(t, w.Extensions, got.Extensions)
				assert.True(t, w.AppendedAt.Equal(got.AppendedAt), "%s %d appended at", n, w.Index)
			}
			var missing raft.Log
			assert.ErrorIs(t, g.GetLog(uint64(len(want[n])+1), &missing), raft.ErrLogNotFound)
		}
	}
	check(s, groups)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, groups[names[0]].StoreLog(entry(rng, 1000)), ErrClosed)

	s2 := openStore(t, dir)
	reopened := map[string]*Group{}
	for _, n := range names {
		g, err := s2.Group(n)
		require.NoError(t, err)
		reopened[n] = g
	}
	check(s2, reopened)
}

// TestDeleteRange deletes a prefix (compaction), a suffix (a conflicting tail, then rewritten
// with another term) and everything (a snapshot installed), and checks bounds and entries after
// each and after a reopen.
func TestDeleteRange(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	g, err := s.Group("g")
	require.NoError(t, err)
	other, err := s.Group("g2")
	require.NoError(t, err)
	var logs []*raft.Log
	for i := uint64(1); i <= 20; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: []byte{byte(i)}})
	}
	require.NoError(t, g.StoreLogs(logs))
	require.NoError(t, other.StoreLogs(logs))
	bounds := func(g *Group) (uint64, uint64) {
		f, err := g.FirstIndex()
		require.NoError(t, err)
		l, err := g.LastIndex()
		require.NoError(t, err)
		return f, l
	}

	require.NoError(t, g.DeleteRange(1, 5))
	f, l := bounds(g)
	assert.Equal(t, []uint64{6, 20}, []uint64{f, l}, "after a prefix")
	var e raft.Log
	assert.ErrorIs(t, g.GetLog(5, &e), raft.ErrLogNotFound)
	require.NoError(t, g.GetLog(6, &e))

	require.NoError(t, g.DeleteRange(15, 20))
	f, l = bounds(g)
	assert.Equal(t, []uint64{6, 14}, []uint64{f, l}, "after a suffix")
	require.NoError(t, g.StoreLogs([]*raft.Log{{Index: 15, Term: 2, Data: []byte("new")}}))
	require.NoError(t, g.GetLog(15, &e))
	assert.Equal(t, uint64(2), e.Term)
	assert.Equal(t, "new", string(e.Data))
	assert.ErrorIs(t, g.GetLog(16, &e), raft.ErrLogNotFound)
	assert.ErrorIs(t, g.StoreLogs([]*raft.Log{{Index: 17, Term: 2}}), ErrNotContiguous, "a gap")

	require.NoError(t, s.Close())
	s = openStore(t, dir)
	g, err = s.Group("g")
	require.NoError(t, err)
	f, l = bounds(g)
	assert.Equal(t, []uint64{6, 15}, []uint64{f, l}, "after a reopen")
	other, err = s.Group("g2")
	require.NoError(t, err)
	f, l = bounds(other)
	assert.Equal(t, []uint64{1, 20}, []uint64{f, l}, "the other group is untouched")

	require.NoError(t, g.DeleteRange(6, 15))
	f, l = bounds(g)
	assert.Equal(t, []uint64{0, 0}, []uint64{f, l}, "after deleting everything")
	require.NoError(t, g.StoreLogs([]*raft.Log{{Index: 100, Term: 3}}), "a log restarts after a snapshot's index")
	f, l = bounds(g)
	assert.Equal(t, []uint64{100, 100}, []uint64{f, l})
}

// TestStable checks the stable values raft keeps (term, vote) and the "not found" error raft
// compares by text.
func TestStable(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	g, err := s.Group("g")
	require.NoError(t, err)
	_, err = g.GetUint64([]byte("CurrentTerm"))
	require.Error(t, err)
	assert.Equal(t, "not found", err.Error())
	require.NoError(t, g.SetUint64([]byte("CurrentTerm"), 7))
	require.NoError(t, g.Set([]byte("LastVoteCand"), []byte("n2")))
	require.NoError(t, s.Close())

	s = openStore(t, dir)
	g, err = s.Group("g")
	require.NoError(t, err)
	v, err := g.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	assert.Equal(t, uint64(7), v)
	b, err := g.Get([]byte("LastVoteCand"))
	require.NoError(t, err)
	assert.Equal(t, "n2", string(b))
	other, err := s.Group("g-other")
	require.NoError(t, err)
	_, err = other.Get([]byte("LastVoteCand"))
	assert.EqualError(t, err, "not found", "stable values are per group")
}

// TestDrop checks that a dropped group is gone and others stay, that an open group can be
// neither opened twice nor dropped, and that names with a 0x00 byte are refused.
func TestDrop(t *testing.T) {
	s := openStore(t, t.TempDir())
	a, err := s.Group("a")
	require.NoError(t, err)
	b, err := s.Group("ab")
	require.NoError(t, err)
	for _, g := range []*Group{a, b} {
		require.NoError(t, g.StoreLogs([]*raft.Log{{Index: 1, Term: 1}, {Index: 2, Term: 1}}))
		require.NoError(t, g.SetUint64([]byte("CurrentTerm"), 1))
	}
	_, err = s.Group("a")
	assert.ErrorIs(t, err, ErrGroupOpen)
	assert.ErrorIs(t, s.Drop("a"), ErrGroupOpen)
	require.NoError(t, a.Close())
	has, err := s.HasState("a")
	require.NoError(t, err)
	assert.True(t, has)
	require.NoError(t, s.Drop("a"))
	has, err = s.HasState("a")
	require.NoError(t, err)
	assert.False(t, has, "a dropped group has no state")
	a, err = s.Group("a")
	require.NoError(t, err)
	last, err := a.LastIndex()
	require.NoError(t, err)
	assert.Zero(t, last)
	last, err = b.LastIndex()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), last, "a group whose name starts with the dropped one's stays")
	var e raft.Log
	require.NoError(t, b.GetLog(2, &e))
	_, err = s.Group("bad\x00name")
	assert.Error(t, err)
	_, err = s.Group("")
	assert.Error(t, err)
}

// TestGroupCommit appends to 16 groups at once and checks that the write-ahead log was synced
// fewer times than there were appends; appends of one group at a time, the control, sync once
// each, which shows the count would catch appends that each sync on their own.
func TestGroupCommit(t *testing.T) {
	s := openStore(t, t.TempDir())
	const groups, appends = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	for i := 0; i < groups; i++ {
		g, err := s.Group(fmt.Sprintf("g%d", i))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := uint64(1); j <= appends; j++ {
				if err := g.StoreLog(&raft.Log{Index: j, Term: 1, Data: make([]byte, 200)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	st := s.Stats()
	t.Logf("concurrent: %d appends, %d syncs", st.Appends, st.Syncs)
	require.Equal(t, uint64(groups*appends), st.Appends)
	assert.Less(t, st.Syncs, st.Appends*3/4, "concurrent appends of several groups share syncs")

	g, err := s.Group("serial")
	require.NoError(t, err)
	for j := uint64(1); j <= 40; j++ {
		require.NoError(t, g.StoreLog(&raft.Log{Index: j, Term: 1}))
	}
	// Pebble counts a sync once its writers are woken, so the last one may show a moment later.
	assert.Eventually(t, func() bool { return s.Stats().Syncs-st.Syncs >= 40 }, 5*time.Second, 10*time.Millisecond,
		"an append alone syncs: 40 appends one at a time, want 40 syncs")
	after := s.Stats()
	t.Logf("one at a time: %d appends, %d syncs", after.Appends-st.Appends, after.Syncs-st.Syncs)
}

// TestKillLosesNothing runs appenders of four groups in a child process, kills it with SIGKILL
// while it appends, and checks that every entry the child reported stored is in the reopened
// store, and that each group's log is contiguous.
func TestKillLosesNothing(t *testing.T) {
	if dir := os.Getenv("RAFTLOG_CHILD_DIR"); dir != "" {
		childAppend(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillLosesNothing$")
	cmd.Env = append(os.Environ(), "RAFTLOG_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	acked := map[string]uint64{}
	sc := bufio.NewScanner(out)
	n := 0
	for sc.Scan() && n < 2000 {
		name, idx, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		i, err := strconv.ParseUint(idx, 10, 64)
		require.NoError(t, err)
		acked[name] = max(acked[name], i)
		n++
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.Equal(t, 2000, n, "the child reported appends")

	s := openStore(t, dir)
	for name, want := range acked {
		g, err := s.Group(name)
		require.NoError(t, err)
		first, err := g.FirstIndex()
		require.NoError(t, err)
		last, err := g.LastIndex()
		require.NoError(t, err)
		assert.Equal(t, uint64(1), first, name)
		assert.GreaterOrEqual(t, last, want, "%s: an acknowledged entry is lost", name)
		for i := first; i <= last; i++ {
			var e raft.Log
			require.NoError(t, g.GetLog(i, &e), "%s entry %d", name, i)
			assert.Equal(t, fmt.Sprintf("%s-%d", name, i), string(e.Data))
		}
	}
}

// childAppend appends to four groups until killed, printing "group index" after each append
// returned.
func childAppend(dir string) {
	s, err := Open(dir, Options{})
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("p%d", i)
		g, err := s.Group(name)
		if err != nil {
			panic(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := uint64(1); ; j++ {
				if err := g.StoreLog(&raft.Log{Index: j, Term: 1, Data: []byte(fmt.Sprintf("%s-%d", name, j))}); err != nil {
					panic(err)
				}
				mu.Lock()
				fmt.Fprintf(w, "%s %d\n", name, j)
				_ = w.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
