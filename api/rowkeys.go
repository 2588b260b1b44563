package api

import (
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// MaxRowKeysNear bounds the count of one row_keys request.
const MaxRowKeysNear = 100

// rowKeys answers GET /v1/{ds}/row_keys?near=ROW&count=N: N (default 1, at most
// MaxRowKeysNear) new random row keys in ROW's shard. A random key lands in a given shard with
// probability 1/shards, so each costs about shards hashes (4096: tens of microseconds).
func (s *Server) rowKeys(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	query := r.URL.Query()
	near, err := cells.ParseRowKey(query.Get("near"))
	if err != nil {
		return invalid("near", "%v", err)
	}
	count := 1
	if v := query.Get("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxRowKeysNear {
			return invalid("count", "%q must be an integer from 1 to %d", v, MaxRowKeysNear)
		}
		count = n
	}
	shard := cells.ShardOf(near, q.spec.Shards)
	out := wire.RowKeysResponse{Shard: shard, Partition: -1, RowKeys: make([]string, 0, count)}
	for _, p := range q.spec.Partitions {
		if p.Shards().Contains(shard) {
			out.Partition = p.ID
		}
	}
	for len(out.RowKeys) < count {
		if k := uuid.New(); cells.ShardOf(k, q.spec.Shards) == shard {
			out.RowKeys = append(out.RowKeys, k.String())
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
