package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
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

// TestRestoreCellsLost is the probe of issue 19 (item 5): a cell written after a backup must
// not be dropped silently by a forced restore. force=true alone is refused (409 naming the one
// cell lost), a dry run reports it and changes nothing, accept_lost_cells with any other count
// is refused, and accept_lost_cells=1 restores, dropping the cell. The restores go through a
// node that does not lead the partition (the node RPC). Async datastores refuse restores and
// dry runs alike (501). Parallel: each engine's cluster is the test's own.
func TestRestoreCellsLost(t *testing.T) {
	t.Parallel()
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Pebble, clustertest.MySQL, clustertest.Async} {
		t.Run(string(engine), func(t *testing.T) {
			t.Parallel()
			testRestoreCellsLost(t, engine)
		})
	}
}

func testRestoreCellsLost(t *testing.T, engine clustertest.Engine) {
	c := clustertest.Start(t, clustertest.Options{Engine: engine})
	s := &session{c: c}
	if engine == clustertest.Async {
		for _, q := range []string{"?dry_run=true", "?force=true", "?accept_lost_cells=1"} {
			s.do(t, 0, http.MethodPost, "/v1/admin/restore/trips/0"+q, "x").expectError(t, http.StatusNotImplemented, wire.CodeUnimplemented, "")
		}
		return
	}
	// Rows of partition 0 (shards 0..7 of 16).
	var rows []string
	for i := 0; len(rows) < 11; i++ {
		r := uuid.NewSHA1(uuid.NameSpaceDNS, []byte(fmt.Sprint("lost", i)))
		if cells.ShardOf(r, 16) < 8 {
			rows = append(rows, r.String())
		}
	}
	for _, r := range rows[:10] {
		s.do(t, 0, http.MethodPut, "/v1/trips/cells/"+r+"/BASE/1", `{"before":true}`).expect(t, http.StatusCreated)
	}
	backup := s.do(t, 1, http.MethodGet, "/v1/admin/backup/trips/0", "")
	require.Equal(t, http.StatusOK, backup.status, "backup: %s", backup.body)
	// The cell written after the backup.
	late := "/v1/trips/cells/" + rows[10] + "/BASE/1"
	s.do(t, 0, http.MethodPut, late, `{"after":true}`).expect(t, http.StatusCreated)

	via := (c.LeaderOf(0) + 1) % 3
	restore := func(query string) answer {
		t.Helper()
		res, err := http.Post(c.URL(via)+"/v1/admin/restore/trips/0"+query, "application/octet-stream", bytes.NewReader(backup.body))
		require.NoError(t, err, "POST restore%s", query)
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		require.NoError(t, err, "POST restore%s: read the answer", query)
		return answer{status: res.StatusCode, header: res.Header, body: data}
	}
	result := func(a answer) map[string]any {
		t.Helper()
		a.expect(t, http.StatusOK)
		var m map[string]any
		require.NoError(t, json.Unmarshal(a.body, &m))
		return m
	}
	lateThere := func(what string) {
		t.Helper()
		a := s.do(t, 0, http.MethodGet, late, "")
		require.Equal(t, http.StatusOK, a.status, "%s: the late cell, got %s", what, a.body)
	}
	refusedLost := func(query, want string) {
		t.Helper()
		a := restore(query)
		a.expectError(t, http.StatusConflict, wire.CodeConflict, "accept_lost_cells")
		var e wire.ErrorBody
		a.decode(t, &e)
		assert.Contains(t, e.Error.Message, want, "restore%s: message", query)
		lateThere("after restore" + query)
	}

	// Before issue 19 this answered 200 and the late cell was gone.
	refusedLost("?force=true", "1 cells of the partition are not in the backup")
	// Without parameters: refused before the stream is read, as any partition holding cells.
	restore("").expectError(t, http.StatusConflict, wire.CodeConflict, "")
	lateThere("after a restore without parameters")

	dry := result(restore("?dry_run=true"))
	assert.Equal(t, true, dry["dry_run"], "dry run: dry_run")
	assert.EqualValues(t, 1, dry["cells_lost"], "dry run: cells_lost")
	assert.EqualValues(t, 11, dry["target_cells"], "dry run: target_cells")
	assert.EqualValues(t, 10, dry["cells"], "dry run: the backup's cells")
	lateThere("after the dry run")

	refusedLost("?accept_lost_cells=0", "not the 0 accepted")
	refusedLost("?accept_lost_cells=2", "not the 2 accepted")
	refusedLost("?force=true&accept_lost_cells=2", "not the 2 accepted")
	for q, field := range map[string]string{
		"?accept_lost_cells=-1": "accept_lost_cells", "?accept_lost_cells=x": "accept_lost_cells",
		"?accept_lost_cells=1&accept_lost_cells=1": "accept_lost_cells", "?dry_run=maybe": "dry_run",
	} {
		restore(q).expectError(t, http.StatusBadRequest, wire.CodeInvalidArgument, field)
	}
	lateThere("after refused restores")

	done := result(restore("?accept_lost_cells=1"))
	assert.Equal(t, false, done["dry_run"], "restore: dry_run")
	assert.EqualValues(t, 1, done["cells_lost"], "restore: cells_lost")
	assert.EqualValues(t, 11, done["target_cells"], "restore: target_cells")
	require.Eventually(t, func() bool {
		a, err := s.tryDo(0, http.MethodGet, late, "")
		return err == nil && a.status == http.StatusNotFound
	}, time.Minute, 50*time.Millisecond, "the late cell is gone after the accepted restore")
	s.do(t, 2, http.MethodGet, "/v1/trips/cells/"+rows[3]+"/BASE/1", "").expect(t, http.StatusOK)

	// Now every cell of the partition is in the backup: force replaces it, losing none.
	again := result(restore("?force=true"))
	assert.EqualValues(t, 0, again["cells_lost"], "forced restore of the same backup: cells_lost")
	assert.EqualValues(t, 10, again["target_cells"], "forced restore of the same backup: target_cells")
	restore("").expectError(t, http.StatusConflict, wire.CodeConflict, "")
}
