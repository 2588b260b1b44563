package pebblelog

import (
	"fmt"
	"log/slog"
)

// Logger implements pebble's Logger over slog. Pebble's informational lines (flushes,
// compactions, WAL rotations) go to Debug, so a node logs nothing of them by default.
type Logger struct {
	// L receives the lines; it must not be nil.
	L *slog.Logger
	// Panic is the prefix of Fatalf's panic message, e.g. "raftlog".
	Panic string
}

// Infof logs at Debug.
func (l Logger) Infof(format string, args ...any) { l.L.Debug(fmt.Sprintf(format, args...)) }

// Fatalf logs at Error and panics: pebble calls it on corruption it cannot go on from, and
// expects it not to return.
func (l Logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.L.Error(msg)
	panic(l.Panic + ": " + msg)
}
