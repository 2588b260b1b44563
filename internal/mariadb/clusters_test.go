package mariadb_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadb"
)

func TestOptionsDSNs(t *testing.T) {
	t.Parallel()
	opts := mariadb.ReplicatedOptions{Clusters: 2, Minions: 1, User: "app",
		Hosts: []string{"127.0.0.2", "127.0.0.3", "0.0.0.0", "::"},
		Ports: []int{4000, 4001, 4002, 4003}}
	got, err := opts.DSNs()
	require.NoError(t, err)
	assert.Equal(t, [][]string{
		{"app@tcp(127.0.0.2:4000)/", "app@tcp(127.0.0.3:4001)/"},
		// A wildcard bind address is reached through 127.0.0.1.
		{"app@tcp(127.0.0.1:4002)/", "app@tcp(127.0.0.1:4003)/"},
	}, got, "DSNs of 2 clusters of a master and a minion")

	def, err := mariadb.ReplicatedOptions{Ports: []int{1, 2, 3, 4, 5, 6}}.DSNs()
	require.NoError(t, err)
	assert.Equal(t, [][]string{
		{"schemaless@tcp(127.0.0.1:1)/", "schemaless@tcp(127.0.0.1:2)/", "schemaless@tcp(127.0.0.1:3)/"},
		{"schemaless@tcp(127.0.0.1:4)/", "schemaless@tcp(127.0.0.1:5)/", "schemaless@tcp(127.0.0.1:6)/"},
	}, def, "DSNs with the default shape, user and host")

	for _, bad := range []mariadb.ReplicatedOptions{
		{Clusters: 1, Minions: 1},                                 // no fixed ports
		{Clusters: 1, Minions: 1, Ports: []int{4000, 0}},          // one free port
		{Clusters: 1, Minions: 1, Ports: []int{4000, 4001, 4002}}, // wrong length
	} {
		_, err := bad.DSNs()
		assert.Error(t, err, "DSNs of %+v: want an error", bad)
	}
}

func TestCheckPorts(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()

	err = mariadb.ReplicatedOptions{Clusters: 1, Minions: 1, Ports: []int{freePort, taken}}.CheckPorts()
	assert.ErrorIs(t, err, mariadb.ErrPortInUse, "CheckPorts with port %d taken", taken)
	assert.NoError(t, mariadb.ReplicatedOptions{Clusters: 1, Minions: 1, Ports: []int{freePort, 0}}.CheckPorts(),
		"CheckPorts of a free port and a port 0")
}
