package mariadb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/schemaless-db/schemaless/replication"
)

// MarkerFile is the file of ReplicatedOptions.Dir that OpenReplicated writes once a new set is
// set up (replication configured). It holds the set's shape ("clusters 2 minions 2"), checked
// when the set is opened again; a directory without it is an interrupted first start.
const MarkerFile = "replication-set-up"

// OpenReplicated starts the replicated set kept in opts.Dir, which it requires, on the fixed
// opts.Ports, which it requires too (the set's addresses are in a topology), and reports
// whether it resumed an existing set.
//
// The first time (no MarkerFile in Dir) it removes Dir (an interrupted first start leaves
// servers' data without the marker), sets a new set up with StartReplicated and writes the
// marker.
//
// Later it does not set replication up again, which would make member 0 the master blindly,
// even after a failover to another member. It starts every server on its data directory (each
// comes back read_only=ON, its minions resuming from their configured master), then in each
// cluster makes master the one member that replicates from nobody and that the replicating
// members point at: the master when the set stopped, whoever it is now. A fenced old master
// (read-only and replicating from nobody, not pointed at) stays fenced. When the directory holds
// a set of another shape, a member's data is missing or belongs to another member (by
// server_id), or a cluster's master cannot be told, it fails with an error wrapping
// ErrNotResumable.
//
// It blocks until every server answers (several seconds); opts.StartTimeout bounds each
// server's start and, separately, the set-up or recovery of replication. On failure every
// server it started is stopped.
func OpenReplicated(ctx context.Context, opts ReplicatedOptions) (set *ReplicatedSet, resumed bool, err error) {
	opts, err = opts.normalize()
	if err != nil {
		return nil, false, err
	}
	if opts.Dir == "" || len(opts.Ports) == 0 || slices.Contains(opts.Ports, 0) {
		return nil, false, errors.New("mariadb: OpenReplicated needs ReplicatedOptions.Dir and a fixed port for every member")
	}
	want := markerText(opts)
	marker, err := os.ReadFile(filepath.Join(opts.Dir, MarkerFile))
	switch {
	case err == nil:
		if string(marker) != want {
			return nil, false, fmt.Errorf("%w: %s holds a MariaDB set of another shape (%q)", ErrNotResumable, opts.Dir, strings.TrimSpace(string(marker)))
		}
		set, err = resumeReplicated(ctx, opts)
		return set, true, err
	case errors.Is(err, os.ErrNotExist):
		set, err = createReplicated(ctx, opts, want)
		return set, false, err
	default:
		return nil, false, fmt.Errorf("mariadb: %w", err)
	}
}

// markerText is the content of MarkerFile for a set of opts's shape.
func markerText(opts ReplicatedOptions) string {
	return fmt.Sprintf("clusters %d minions %d\n", opts.Clusters, opts.Minions)
}

// createReplicated sets a new set up in a fresh opts.Dir and writes the marker.
func createReplicated(ctx context.Context, opts ReplicatedOptions, marker string) (*ReplicatedSet, error) {
	if err := os.RemoveAll(opts.Dir); err != nil {
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	set, err := StartReplicated(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, MarkerFile), []byte(marker), 0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("mariadb: %w", err), set.Close())
	}
	return set, nil
}

// resumeReplicated starts every server of the set in opts.Dir on its data and recovers each
// cluster's master.
func resumeReplicated(ctx context.Context, opts ReplicatedOptions) (*ReplicatedSet, error) {
	for k := range opts.Clusters * (opts.Minions + 1) {
		dataDir := opts.member(opts.Dir, k).DataDir
		if fi, err := os.Stat(filepath.Join(dataDir, "mysql")); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%w: %s holds no server's data", ErrNotResumable, dataDir)
		}
	}
	s := &ReplicatedSet{user: opts.User}
	if err := s.startMembers(ctx, opts, opts.Dir, "restart"); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	rctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	for c := range s.Clusters {
		if err := s.recoverMaster(rctx, c); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	return s, nil
}

// recoverMaster makes master the member of cluster c that was the master when the set stopped
// (see OpenReplicated).
func (s *ReplicatedSet) recoverMaster(ctx context.Context, c int) error {
	insts := s.Clusters[c].Instances
	sts := make([]replication.MemberStatus, len(insts))
	for m, inst := range insts {
		db, err := replication.Open(inst.DSN())
		if err != nil {
			return err
		}
		sts[m], err = replication.Probe(ctx, db, inst.DSN())
		db.Close()
		if err != nil {
			return &MemberError{Cluster: c, Member: m, Instance: inst, Err: err}
		}
		if k := c*len(insts) + m; sts[m].ServerID != uint32(k+1) {
			return fmt.Errorf("%w: c%d-m%d: server_id %d, want %d: its data belongs to another member", ErrNotResumable, c, m, sts[m].ServerID, k+1)
		}
	}
	votes := map[string]int{}
	for _, st := range sts {
		if st.Replicating {
			votes[net.JoinHostPort(st.MasterHost, strconv.Itoa(st.MasterPort))]++
		}
	}
	var masters, pointed, free []int
	for m, st := range sts {
		switch {
		case st.IsMaster():
			masters = append(masters, m)
		case !st.Replicating:
			free = append(free, m)
			if votes[insts[m].Addr()] > 0 {
				pointed = append(pointed, m)
			}
		}
	}
	var master int
	switch {
	case len(masters) == 1:
		return nil // already writable: nothing to do
	case len(masters) > 1:
		return fmt.Errorf("%w: cluster c%d has %d writable members", ErrNotResumable, c, len(masters))
	case len(pointed) == 1:
		master = pointed[0]
	case len(pointed) == 0 && len(free) == 1:
		master = free[0]
	default:
		return fmt.Errorf("%w: cluster c%d: cannot tell its master (members replicating from nobody: %v; pointed at by the minions: %v)", ErrNotResumable, c, free, pointed)
	}
	db, err := replication.Open(insts[master].DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	if err := replication.MakeMaster(ctx, db); err != nil {
		return &MemberError{Cluster: c, Member: master, Instance: insts[master], Err: err}
	}
	return nil
}
