package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// TestIntegrationVersions writes seven versions of a column and reads them back a page of
// three at a time with GetVersions, ascending and descending, following Next to the end.
func TestIntegrationVersions(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{})
	cl := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	row := itRow(t, 70)
	for ref := int64(1); ref <= 7; ref++ {
		_, err := cl.PutCell(ctx, row, "STATUS", ref*10, json.RawMessage(fmt.Sprintf(`{"v":%d}`, ref)))
		require.NoError(t, err, "PutCell ref key %d", ref*10)
	}
	readAll := func(desc bool) (refs []int64, pages int) {
		var from *int64
		for {
			p, err := cl.GetVersions(ctx, row, "STATUS", from, 3, desc)
			require.NoError(t, err, "GetVersions from %v", from)
			require.LessOrEqual(t, len(p.Cells), 3, "page size")
			for _, cell := range p.Cells {
				assert.JSONEq(t, fmt.Sprintf(`{"v":%d}`, cell.RefKey/10), string(cell.Body), "body of ref key %d", cell.RefKey)
				refs = append(refs, cell.RefKey)
			}
			pages++
			if p.Next == nil {
				return refs, pages
			}
			from = p.Next
		}
	}
	refs, pages := readAll(false)
	assert.Equal(t, []int64{10, 20, 30, 40, 50, 60, 70}, refs, "ascending")
	assert.Equal(t, 3, pages, "ascending pages")
	refs, pages = readAll(true)
	assert.Equal(t, []int64{70, 60, 50, 40, 30, 20, 10}, refs, "descending")
	assert.Equal(t, 3, pages, "descending pages")
	from := int64(35)
	p, err := cl.GetVersions(ctx, row, "STATUS", &from, 0, false)
	require.NoError(t, err)
	require.Len(t, p.Cells, 4, "from 35 up, the server's default limit")
	assert.Equal(t, int64(40), p.Cells[0].RefKey)
	assert.Nil(t, p.Next)
	p, err = cl.GetVersions(ctx, row, "NONE", nil, 0, false)
	require.NoError(t, err)
	assert.NotNil(t, p.Cells, "an empty page is an empty slice")
	assert.Empty(t, p.Cells)
}
