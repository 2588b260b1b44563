package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrMoved: the partition's copy on this server is not the one the partition's placement names
// (it moved to another storage cluster, or this is the target of a move not finished yet).
// Nothing was written; retry on the storage cluster the placement names. Wrapped with the
// placement read.
var ErrMoved = errors.New("storage: partition moved to another storage cluster")

// ErrNotMaster: a read that had to come from its storage cluster's master was served by a
// read-only server (a master fenced or demoted since the node last probed it, or a minion), so
// it may miss writes acknowledged by the master since; CheckMaster returns it.
var ErrNotMaster = errors.New("storage: the server is read-only, not the master")

// Placement states.
const (
	// PlacementActive: the partition lives on Placement.Cluster.
	PlacementActive = "active"
	// PlacementMoving: the partition lives on Placement.Cluster and a move to another cluster
	// is under way (copy and catch-up).
	PlacementMoving = "moving"
)

// Placement is one row of "<prefix>_meta.placement" (async mode): on which storage cluster a
// partition of a datastore lives, from which epoch on. Each storage cluster's master holds a
// row per moved partition; readers take the row with the highest Epoch they can read. A
// partition without a row lives where the topology places it.
type Placement struct {
	Datastore string
	Partition int
	// Cluster names the storage cluster holding the partition (a name of the topology).
	Cluster string
	// Epoch grows by one at each move; 0 is the topology's placement.
	Epoch int64
	// State is PlacementActive or PlacementMoving.
	State string
	// UpdatedAt is when the row was last written (the server's clock, UTC); set by
	// WritePlacement.
	UpdatedAt time.Time
}

// placementDDL creates "<meta>.placement", one row per (datastore, partition).
func placementDDL(meta string) string {
	return "CREATE TABLE IF NOT EXISTS " + meta + ".`placement` (\n" +
		"\tdatastore VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\t`partition` INT NOT NULL,\n" +
		"\tcluster VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\tepoch BIGINT NOT NULL,\n" +
		"\tstate VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\tupdated_at DATETIME(6) NOT NULL,\n" +
		"\tPRIMARY KEY (datastore, `partition`)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
}

// placementTable returns the quoted placement table of a MySQL dialect.
func (d *dialect) placementTable() string { return fmt.Sprintf("`%s_meta`.`placement`", d.prefix) }

// ReadPlacement returns the placement row of datastore's partition on this server, and false
// when there is none (or no placement table). One statement. Errors: ErrNoBuffer for SQLite and
// read-only stores, or the server's.
func (s *Store) ReadPlacement(ctx context.Context, datastore string, partition int) (Placement, bool, error) {
	if s.db == nil || s.meta == "" {
		return Placement{}, false, ErrNoBuffer
	}
	return readPlacement(ctx, s.db, s.meta+".`placement`", datastore, partition, "")
}

// readPlacement reads one placement row of table tbl with q's locking suffix ("" or
// " LOCK IN SHARE MODE").
func readPlacement(ctx context.Context, db queryer, tbl, datastore string, partition int, lock string) (Placement, bool, error) {
	p := Placement{Datastore: datastore, Partition: partition}
	err := db.QueryRowContext(ctx, "SELECT cluster, epoch, state, updated_at FROM "+tbl+
		" WHERE datastore = ? AND `partition` = ?"+lock, datastore, partition).Scan(&p.Cluster, &p.Epoch, &p.State, createdAtScanner(&p.UpdatedAt))
	switch {
	case errors.Is(err, sql.ErrNoRows) || isNoTable(err):
		return Placement{}, false, nil
	case err != nil:
		return Placement{}, false, fmt.Errorf("storage: read placement of %s/%d: %w", datastore, partition, err)
	}
	return p, true, nil
}

// WritePlacement writes p as its partition's placement row on this server, unless the row
// there has a higher epoch: a row only moves forward. It reports whether p was written (false:
// the stored row's epoch is higher). UpdatedAt is set by the server. One statement (an upsert,
// in its own transaction); a write transaction of the partition holding its fence check (see
// SetFence) makes it wait until that transaction ends. Errors: ErrNoBuffer for SQLite and
// read-only stores, ErrInvalidConfig for an empty cluster or an unknown state, or the server's.
func (s *Store) WritePlacement(ctx context.Context, p Placement) (bool, error) {
	if s.db == nil || s.meta == "" {
		return false, ErrNoBuffer
	}
	if p.Cluster == "" || (p.State != PlacementActive && p.State != PlacementMoving) || p.Epoch < 0 {
		return false, fmt.Errorf("%w: placement %+v", ErrInvalidConfig, p)
	}
	tbl := s.meta + ".`placement`"
	// MariaDB assigns left to right, each assignment seeing the ones before: epoch goes last
	// so that the conditions compare with the stored epoch.
	_, err := s.db.ExecContext(ctx, "INSERT INTO "+tbl+" (datastore, `partition`, cluster, epoch, state, updated_at) "+
		"VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE "+
		"cluster = IF(VALUES(epoch) >= epoch, VALUES(cluster), cluster), "+
		"state = IF(VALUES(epoch) >= epoch, VALUES(state), state), "+
		"updated_at = IF(VALUES(epoch) >= epoch, VALUES(updated_at), updated_at), "+
		"epoch = GREATEST(epoch, VALUES(epoch))",
		p.Datastore, p.Partition, p.Cluster, p.Epoch, p.State)
	if err != nil {
		return false, fmt.Errorf("storage: write placement of %s/%d: %w", p.Datastore, p.Partition, err)
	}
	got, ok, err := s.ReadPlacement(ctx, p.Datastore, p.Partition)
	if err != nil {
		return false, err
	}
	return ok && got.Epoch == p.Epoch && got.Cluster == p.Cluster && got.State == p.State, nil
}

// SetFence makes the partition's copy on this server refuse writes and report reads as moved
// unless the server's placement row of the partition is missing or names cluster (the storage
// cluster this server belongs to): Begin then checks the row inside the write transaction with
// a locking read (so a WritePlacement naming another cluster either waits for the transaction
// to end or is seen by it, never both), and CheckFence checks it on demand. "" turns the fence
// off (the default). MySQL only: a no-op on SQLite. Safe from any goroutine.
func (p *PartitionStore) SetFence(cluster string) {
	if p.d.engine != EngineMySQL {
		return
	}
	if cluster == "" {
		p.fence.Store(nil)
		return
	}
	p.fence.Store(&cluster)
}

// CheckFence returns nil when no fence is set (SetFence) or the server's placement row of the
// partition is missing or names the fence's cluster, and an error wrapping ErrMoved otherwise.
// One statement on the read pool (on a minion: the row as replicated so far). Any goroutine.
func (p *PartitionStore) CheckFence(ctx context.Context) error {
	c := p.fence.Load()
	if c == nil {
		return nil
	}
	if p.closed.Load() {
		return ErrClosed
	}
	pl, ok, err := readPlacement(ctx, p.read, p.d.placementTable(), p.id.Datastore, p.id.Partition, "")
	if err != nil {
		return p.fail("check placement", err)
	}
	return movedError(pl, ok, *c)
}

// CheckMaster is CheckFence for a read that must come from its storage cluster's master (a
// strong read in async mode), in one statement on the read pool: it also returns an error
// wrapping ErrNotMaster when the server is read-only (@@global.read_only). Call it after the
// read. A server writable after the read was the master during it: it was writable then too,
// or it was fenced and made writable again with nothing written meanwhile (a killed master
// restarted read-only, then unfenced); and a failover fences or stops the old master before it
// promotes another, so no other master took a write before the read ended. It catches a node
// that was paused through a failover and still takes the fenced old master for the master
// until its next probe. MySQL only; nil on SQLite. Any goroutine.
func (p *PartitionStore) CheckMaster(ctx context.Context) error {
	if p.d.engine != EngineMySQL {
		return nil
	}
	if p.closed.Load() {
		return ErrClosed
	}
	var (
		readOnly bool
		cluster  sql.NullString
		epoch    sql.NullInt64
	)
	err := p.read.QueryRowContext(ctx, "SELECT @@global.read_only, pl.cluster, pl.epoch FROM (SELECT 1) AS one LEFT JOIN "+
		p.d.placementTable()+" AS pl ON pl.datastore = ? AND pl.`partition` = ?", p.id.Datastore, p.id.Partition).
		Scan(&readOnly, &cluster, &epoch)
	if isNoTable(err) {
		err = p.read.QueryRowContext(ctx, "SELECT @@global.read_only").Scan(&readOnly)
	}
	if err != nil {
		return p.fail("check master", err)
	}
	if readOnly {
		return fmt.Errorf("%w: %s/%d was read from a read-only server", ErrNotMaster, p.id.Datastore, p.id.Partition)
	}
	if c := p.fence.Load(); c != nil {
		pl := Placement{Datastore: p.id.Datastore, Partition: p.id.Partition, Cluster: cluster.String, Epoch: epoch.Int64}
		return movedError(pl, cluster.Valid, *c)
	}
	return nil
}

// checkFenceTx is CheckFence inside the write transaction, with a shared lock on the row.
func (p *PartitionStore) checkFenceTx(ctx context.Context, tx *sql.Tx) error {
	c := p.fence.Load()
	if c == nil {
		return nil
	}
	pl, ok, err := readPlacement(ctx, tx, p.d.placementTable(), p.id.Datastore, p.id.Partition, " LOCK IN SHARE MODE")
	if err != nil {
		return p.fail("check placement", err)
	}
	return movedError(pl, ok, *c)
}

func movedError(pl Placement, ok bool, cluster string) error {
	if !ok || pl.Cluster == cluster {
		return nil
	}
	return fmt.Errorf("%w: %s/%d is on storage cluster %s since epoch %d, not on %s", ErrMoved, pl.Datastore, pl.Partition, pl.Cluster, pl.Epoch, cluster)
}
