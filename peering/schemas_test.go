package peering_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/watchdog"
	"github.com/schemaless-db/schemaless/wire"
)

// TestSchemasReplicate: schema versions go to the peer that lacks them, in order and with the
// same numbers, both ways; a cell checked at its origin against the schemas there is stored at
// the peer even when a newer version there rejects it (the version reached the peer first);
// and a column whose versions diverged (each cluster registered another text for version 1)
// is reported in the stream's status and left alone.
func TestSchemasReplicate(t *testing.T) {
	t.Parallel()
	watchdog.Start(t, 6*time.Minute) // a hang ends with the stacks, not with make test's 45 minutes
	east, west := startCluster(t, "east"), startCluster(t, "west")
	ec, wc := clientOf(t, east), clientOf(t, west)
	ctx := context.Background()
	const (
		v1 = `{"type":"object","required":["km"]}`
		v2 = `{"type":"object","required":["km","gate"]}`
		v3 = `{"type":"object","required":["km","gate","seat"]}`
	)
	put := func(cl *client.Client, col, text string, want int) {
		t.Helper()
		res, err := cl.PutSchema(ctx, col, json.RawMessage(text), false)
		require.NoError(t, err, "register %s", col)
		require.Equal(t, want, res.Version, "version of %s", col)
	}
	// Before the peers are set: BASE v1 in both, v2 in west only; STATUS diverges at v1;
	// NOTES has a version in east alone.
	put(ec, "BASE", v1, 1)
	put(wc, "BASE", v1, 1)
	put(wc, "BASE", v2, 2)
	put(ec, "STATUS", v1, 1)
	put(wc, "STATUS", v2, 1)
	put(ec, "NOTES", v1, 1)
	// A cell east accepts (v1) that west's v2 rejects.
	row := uuid.New()
	_, err := ec.PutCells(ctx, []client.CellWrite{{Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{"km":5}`)}})
	require.NoError(t, err)
	_, err = wc.PutCells(ctx, []client.CellWrite{{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{"km":5}`)}})
	require.ErrorIs(t, err, client.ErrSchemaViolation, "west's v2 refuses a local write without gate")

	_, err = ec.SetReplicationPeer(ctx, "west", wire.ReplicationPeerRequest{Endpoints: west.URLs(), Datastores: []string{"trips"}})
	require.NoError(t, err)
	_, err = wc.SetReplicationPeer(ctx, "east", wire.ReplicationPeerRequest{Endpoints: east.URLs(), Datastores: []string{"trips"}})
	require.NoError(t, err)

	// texts and canon give schemas as decoded JSON values, in version order.
	texts := func(cl *client.Client, col string) []any {
		vs, err := cl.Schemas(ctx, col)
		if err != nil {
			return nil
		}
		var out []any
		for _, v := range vs.Versions {
			var x any
			require.NoError(t, json.Unmarshal(v.Schema, &x))
			out = append(out, x)
		}
		return out
	}
	canon := func(s ...string) []any {
		var out []any
		for _, text := range s {
			var x any
			require.NoError(t, json.Unmarshal([]byte(text), &x))
			out = append(out, x)
		}
		return out
	}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(canon(v1, v2), texts(ec, "BASE")) }, 30*time.Second, 100*time.Millisecond,
		"east receives BASE v2 from west")
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(canon(v1), texts(wc, "NOTES")) }, 30*time.Second, 100*time.Millisecond,
		"west receives NOTES v1 from east")
	require.Eventually(t, func() bool {
		res, err := wc.GetCell(ctx, cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1})
		return err == nil && res.Origin == "east"
	}, 30*time.Second, 100*time.Millisecond, "east's cell, valid there, is stored at west despite west's v2")

	// A version registered later in one cluster follows, with its number.
	put(ec, "BASE", v3, 3)
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(canon(v1, v2, v3), texts(wc, "BASE")) }, 30*time.Second, 100*time.Millisecond,
		"west receives BASE v3")

	// STATUS diverged: reported, not sent.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := ec.Replication(ctx)
		require.NoError(c, err)
		var msgs []string
		for _, p := range st.Peers {
			for _, s := range p.Streams {
				msgs = append(msgs, s.SchemaError)
			}
		}
		assert.True(c, strings.Contains(strings.Join(msgs, ";"), "STATUS diverged"), "schema errors: %q", msgs)
	}, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, canon(v1), texts(ec, "STATUS"), "east's STATUS unchanged")
	assert.Equal(t, canon(v2), texts(wc, "STATUS"), "west's STATUS unchanged")
}
