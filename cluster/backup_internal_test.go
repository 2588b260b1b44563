package cluster

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidateRestoreRPC: the restore RPC reads its options from well-formed parameters and
// refuses, with 400 and before reading the stream, an unknown datastore, a partition it does
// not have, a malformed flag or count, an unknown or repeated parameter.
func TestValidateRestoreRPC(t *testing.T) {
	t.Parallel()
	spec := &topology.DatastoreSpec{Name: "trips", Shards: 16, Partitions: []topology.PartitionSpec{{ID: 0, FirstShard: 0, LastShard: 7}, {ID: 1, FirstShard: 8, LastShard: 15}}}
	n := &Node{}
	n.view.Store(&nodeView{byName: map[string]*datastore{"trips": {spec: spec}}, top: &topology.Topology{}})
	three := int64(3)
	for q, want := range map[string]partition.RestoreOptions{
		"datastore=trips&partition=1":                                 {},
		"datastore=trips&partition=0&force=true&dry_run=false":        {Force: true},
		"datastore=trips&partition=0&dry_run=true":                    {DryRun: true},
		"datastore=trips&partition=0&accept_lost_cells=3&force=false": {AcceptLostCells: &three},
	} {
		v, err := url.ParseQuery(q)
		require.NoError(t, err)
		ds, pid, opts, err := n.validateRestoreRPC(v)
		require.NoError(t, err, "?%s", q)
		assert.Equal(t, "trips", ds, "?%s: datastore", q)
		assert.Equal(t, v.Get("partition"), []string{"0", "1"}[pid], "?%s: partition", q)
		assert.Equal(t, want, opts, "?%s: options", q)
	}
	for q, want := range map[string]string{
		"datastore=nope&partition=0":                       `datastore: cluster: unknown datastore: "nope"`,
		"partition=0":                                      "datastore",
		"datastore=trips&partition=9":                      "datastore trips has no partition 9",
		"datastore=trips&partition=x":                      `partition "x" is not a partition id`,
		"datastore=trips&partition=0&force=yes":            `force "yes" must be true or false`,
		"datastore=trips&partition=0&dry_run=1":            `dry_run "1" must be true or false`,
		"datastore=trips&partition=0&accept_lost_cells=-3": `accept_lost_cells "-3" must be a count of cells >= 0`,
		"datastore=trips&partition=0&accept_lost_cells=x":  `accept_lost_cells "x" must be a count of cells >= 0`,
		"datastore=trips&partition=0&accept_lost_cells=":   `accept_lost_cells "" must be a count of cells >= 0`,
		"datastore=trips&partition=0&bogus=1":              "unknown parameter bogus",
		"datastore=trips&partition=0&partition=1":          "parameter partition given 2 times",
	} {
		// Through the handler: 400, the ErrBadRPC message, the body unread.
		body := &unreadBody{Reader: strings.NewReader("not read")}
		req := httptest.NewRequest(http.MethodPost, rpcRestorePath+"?"+q, body)
		rec := httptest.NewRecorder()
		n.serveRestore(rec, req)
		assert.Equal(t, http.StatusBadRequest, rec.Code, "?%s: status", q)
		assert.True(t, strings.HasPrefix(rec.Body.String(), ErrBadRPC.Error()+": restore: "), "?%s: got %q, want the ErrBadRPC prefix", q, rec.Body.String())
		assert.Contains(t, rec.Body.String(), want, "?%s", q)
		assert.False(t, body.read, "?%s: the stream was read", q)
	}
}

// unreadBody records whether it was read.
type unreadBody struct {
	*strings.Reader
	read bool
}

func (u *unreadBody) Read(p []byte) (int, error) {
	u.read = true
	return u.Reader.Read(p)
}
