package triggers

import (
	"context"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/consumer"
)

// Source is the datastore as a worker uses it: the logs of its shards and the coordinator of
// its group. It is bound to one datastore. client.TriggerSource implements it over the HTTP API
// (a worker in any process); package maintainer's Source implements it in-process over a cluster
// node. A worker calls it from several goroutines at once (delivery, heartbeats, commits), so
// implementations must be safe for concurrent use. Every error is retried by the worker (reads
// after Config.Backoff, group commands with the next heartbeat or commit); a call should give
// up within about 10s plus a read's Wait, so that a heartbeat or a commit is not stuck behind it.
type Source interface {
	// ReadLogs reads one page of each shard of req, in request order: the shard's cells after
	// its Location (or from req.Time) in added_id order, at most req.Limit of them, the
	// location to read on from, and the shard's high-water mark. When no shard has a cell it
	// blocks until one has, req.Wait passes or ctx ends.
	ReadLogs(ctx context.Context, req LogRead) ([]Page, error)
	// GetCell reads the cell at key with consistency (ConsistencyStrong or ConsistencyStale). A
	// missing cell is an error.
	GetCell(ctx context.Context, key cells.Key, consistency string) (cells.Cell, error)
	// GroupCommand runs cmd on the coordinator of group (see package consumer) and returns its
	// result. Every command the worker sends is safe to repeat: commits are fenced by lease
	// epoch and never move an offset backward. After an error the command may or may not
	// have been applied.
	GroupCommand(ctx context.Context, group string, cmd consumer.Command) (consumer.Result, error)
}

// Read consistencies of Config.Consistency, LogRead.Consistency and Source.GetCell: the values
// of client.ConsistencyStrong and client.ConsistencyStale.
const (
	// ConsistencyStrong reads the partition's leader (raft mode) or master (async mode).
	ConsistencyStrong = "strong"
	// ConsistencyStale reads any replica or minion: added_id order is the same on every one.
	ConsistencyStale = "stale"
)

// ShardLocation is where a log read starts in one shard: after the cell whose added_id is
// Location (0: from the first cell).
type ShardLocation struct {
	Shard    int
	Location int64
}

// LogRead is a read of several shards' logs (get_cells_for_shard, batch form).
type LogRead struct {
	// Shards to read, each once, each after its Location.
	Shards []ShardLocation
	// Time, when not zero, starts every shard at its first cell created at or after Time
	// instead of at its Location.
	Time time.Time
	// ColumnKey, when set, keeps only the cells of that column and the tombstones of erased
	// rows.
	ColumnKey string
	// Limit bounds the cells of each page; it is positive.
	Limit int
	// Wait, when positive, long-polls: with no cell in any shard the read waits up to Wait for
	// one to arrive.
	Wait time.Duration
	// Consistency is ConsistencyStale or ConsistencyStrong.
	Consistency string
}

// Page is one shard's answer to a LogRead. Cells are in added_id order, with their bodies in
// stored form (cells.Body) and their AddedID and CreatedAt set. NextLocation is where the next
// read of the shard starts: past the last cell, and past cells of other columns skipped by
// LogRead.ColumnKey. HighWater is the shard's highest added_id when the page was read, -1 when
// unknown.
type Page struct {
	Shard        int
	Cells        []cells.Cell
	NextLocation int64
	HighWater    int64
	// token is what Config.OnPage returned for the page (PageToken).
	token any
}
