package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/wire"
)

func TestBuildIndexQuery(t *testing.T) {
	t.Parallel()
	q, err := buildIndexQuery(indexQueryFlags{shardValue: "42", where: []string{"delay>1"}, fields: []string{"a"}, orderBy: "-delay", limit: 5})
	require.NoError(t, err, "buildIndexQuery")
	assert.Equal(t, json.Number("42"), q.ShardValue, "buildIndexQuery: shard value in %+v", q)
	assert.Len(t, q.Where, 1, "buildIndexQuery: conditions in %+v", q)
	assert.Equal(t, "-delay", q.OrderBy, "buildIndexQuery: order in %+v", q)
	assert.Equal(t, 5, q.Limit, "buildIndexQuery: limit in %+v", q)
	if assert.NotEmpty(t, q.Fields, "buildIndexQuery: fields in %+v", q) {
		assert.Equal(t, "a", q.Fields[0], "buildIndexQuery: first field in %+v", q)
	}
	_, err = buildIndexQuery(indexQueryFlags{shardValue: "x", limit: -1})
	assert.Error(t, err, "buildIndexQuery with limit -1")
	_, err = buildIndexQuery(indexQueryFlags{shardValue: "x", where: []string{"bad"}})
	assert.EqualError(t, err, `--where "bad": no operator after field bad (want = != < <= > >= or in)`, "buildIndexQuery with a bad where")
	q, err = buildIndexQuery(indexQueryFlags{shardValue: `"42"`, where: []string{"destination in LAX,SFO"}})
	require.NoError(t, err, "buildIndexQuery")
	assert.Equal(t, "42", q.ShardValue, "a quoted shard value is a string")
	assert.Equal(t, []wire.IndexCond{{Field: "destination", Op: "in", Value: []any{"LAX", "SFO"}}}, q.Where)
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	v := wire.IndexVersionStatus{State: "building", Progress: 0.5, HandledCells: 50, TotalCells: 100, LagCells: 50, LagSeconds: 2.25, Entries: 40}
	want := "building [############............]  50.0%  50/100 cells  lag 50 cells 2.2s  123 cells/s  40 entries"
	assert.Equal(t, want, progressLine(v, 123.4), "progressLine")
}
