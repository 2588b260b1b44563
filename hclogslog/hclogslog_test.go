package hclogslog

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
)

// Raft's routine messages are written at Debug; every other message keeps its level.
func TestRoutineMessagesAtDebug(t *testing.T) {
	var buf bytes.Buffer
	a := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")
	a.Warn("duplicate requestVote from", "candidate", "127.0.0.1:1")
	a.Info("duplicate requestVote for same term", "term", 1)
	assert.Empty(t, buf.String(), "a split's prepared votes are not reported at Info or Warn")
	a.Warn("rejecting vote request since we have a leader", "from", "127.0.0.1:2")
	a.Log(hclog.Info, "entering follower state")
	assert.Contains(t, buf.String(), "level=WARN msg=\"rejecting vote request since we have a leader\"")
	assert.Contains(t, buf.String(), "level=INFO msg=\"entering follower state\"")
}
