package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// TestBackupEndpoints checks the answers of the backup and restore endpoints: the stream with
// its headers and trailers, and every refusal in the API's error shape. (A restore that
// succeeds is tested in cluster and cmd/schemaless.) Parallel: the cluster is the test's own.
func TestBackupEndpoints(t *testing.T) {
	t.Parallel()
	const limit = 4096
	c := clustertest.Start(t, clustertest.Options{API: api.Config{MaxRestoreBytes: limit}})
	s := &session{c: c}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cs []cells.Cell
	for i := 0; i < 200; i++ {
		b, err := cells.EncodeBody([]byte(fmt.Sprintf(`{"i":%d,"pad":"xxxxxxxxxxxxxxxxxxxxxxxx"}`, i)))
		require.NoError(t, err)
		cs = append(cs, cells.Cell{Key: cells.Key{RowKey: uuid.NewSHA1(uuid.NameSpaceDNS, []byte(fmt.Sprint("backup", i))), ColumnKey: "BASE", RefKey: 1}, Body: b})
	}
	_, err := c.Node(0).PutCells(ctx, "trips", cs)
	require.NoError(t, err, "PutCells")

	// The stream, from a node that may not lead partition 0.
	for node := 0; node < 3; node++ {
		res, err := http.Get(c.URL(node) + "/v1/admin/backup/trips/0")
		require.NoError(t, err, "GET backup through node %d", node)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err, "GET backup through node %d: read the body", node)
		require.Equal(t, http.StatusOK, res.StatusCode, "GET backup through node %d: status", node)
		info, err := fsm.VerifySnapshot(bytes.NewReader(body))
		require.NoError(t, err, "GET backup through node %d: the body verifies", node)
		sum := sha256.Sum256(body)
		for k, want := range map[string]string{
			"Content-Type":                  "application/octet-stream",
			wire.HeaderAppliedIndex:         strconv.FormatUint(info.Header.Applied.Index, 10),
			wire.HeaderAppliedTerm:          strconv.FormatUint(info.Header.Applied.Term, 10),
			wire.HeaderFirstShard:           "0",
			wire.HeaderLastShard:            "7",
			"Trailer:" + wire.TrailerCells:  strconv.FormatInt(info.Cells, 10),
			"Trailer:" + wire.TrailerBytes:  strconv.Itoa(len(body)),
			"Trailer:" + wire.TrailerSHA256: hex.EncodeToString(sum[:]),
		} {
			var got string
			if name, ok := strings.CutPrefix(k, "Trailer:"); ok {
				got = res.Trailer.Get(name)
			} else {
				got = res.Header.Get(k)
			}
			assert.Equal(t, want, got, "GET backup through node %d: %s", node, k)
		}
		require.NotZero(t, info.Cells, "partition 0's backup: cells")
		require.Greater(t, len(body), limit, "partition 0's backup: bytes, more than the restore limit")
		if node < 2 {
			continue
		}
		// Refused restores, each changing nothing.
		post := func(path string, b []byte) answer {
			t.Helper()
			res, err := http.Post(c.URL(node)+path, "application/octet-stream", bytes.NewReader(b))
			require.NoError(t, err, "POST %s", path)
			defer res.Body.Close()
			data, err := io.ReadAll(res.Body)
			require.NoError(t, err, "POST %s: read the answer", path)
			return answer{status: res.StatusCode, header: res.Header, body: data}
		}
		post("/v1/admin/restore/trips/0", body).expectError(t, http.StatusConflict, wire.CodeConflict, "")
		post("/v1/admin/restore/trips/0?force=true", body).expectError(t, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, "body")
		post("/v1/admin/restore/trips/0?force=true", []byte("not a snapshot")).expectError(t, http.StatusBadRequest, wire.CodeInvalidArgument, "body")
		post("/v1/admin/restore/trips/1?force=true", body[:limit/2]).expectError(t, http.StatusBadRequest, wire.CodeInvalidArgument, "body")
		post("/v1/admin/restore/trips/0?force=maybe", body).expectError(t, http.StatusBadRequest, wire.CodeInvalidArgument, "force")
	}
	s.do(t, 0, http.MethodGet, "/v1/admin/backup/trips/7", "").expectError(t, http.StatusNotFound, wire.CodeNotFound, "")
	s.do(t, 0, http.MethodGet, "/v1/admin/backup/nope/0", "").expectError(t, http.StatusNotFound, wire.CodeNotFound, "")
	s.do(t, 0, http.MethodGet, "/v1/admin/backup/trips/x", "").expectError(t, http.StatusBadRequest, wire.CodeInvalidArgument, "partition")
	s.do(t, 0, http.MethodPut, "/v1/admin/backup/trips/0", "").expectError(t, http.StatusMethodNotAllowed, wire.CodeMethod, "")
	s.do(t, 0, http.MethodGet, "/v1/admin/restore/trips/0", "").expectError(t, http.StatusMethodNotAllowed, wire.CodeMethod, "")
	// The refused restores changed nothing.
	page := s.do(t, 1, http.MethodGet, "/v1/trips/shards/0/cells?limit=1000", "").expect(t, http.StatusOK)
	var got wire.ShardCellsResponse
	page.decode(t, &got)
	want := 0
	for _, cl := range cs {
		if cells.ShardOf(cl.RowKey, 16) == 0 {
			want++
		}
	}
	assert.Len(t, got.Cells, want, "shard 0 after refused restores")
}
