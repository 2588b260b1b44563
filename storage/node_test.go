package storage

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNodePrefix(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"n1":                 "sl_n1",
		"Node-2.east":        "sl__ode_2_east",
		"abcdefghijklmnopqr": "sl_abcdefghijklm",
		"":                   "sl_",
	} {
		got := NodePrefix(id)
		assert.Equal(t, want, got, "NodePrefix(%q)", id)
		assert.LessOrEqual(t, len(got), MaxPrefixLen, "NodePrefix(%q)", id)
	}
	assert.True(t, validPrefix(NodePrefix("Ünïcode node")), "a prefix MySQLConfig accepts")
}

// The driver's logger adapter logs at Warn, formatted as fmt.Sprint, to the logger
// SetDriverLogger gave (not parallel: the logger is the process's).
func TestDriverLogger(t *testing.T) {
	var buf bytes.Buffer
	SetDriverLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { driverLog.Store(nil) })
	driverLogger{}.Print("packets.go:37: ", "unexpected EOF")
	assert.Contains(t, buf.String(), "level=WARN")
	assert.Contains(t, buf.String(), `msg="packets.go:37: unexpected EOF"`)
}
