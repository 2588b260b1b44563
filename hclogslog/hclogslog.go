package hclogslog

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// levelTrace is below slog.LevelDebug: hclog's Trace.
const levelTrace = slog.LevelDebug - 4

// Logger is an hclog.Logger writing to a *slog.Logger. hclog's levels map to slog's (Trace to
// Debug-4). SetLevel is ignored: the slog handler decides what is written.
type Logger struct {
	l     *slog.Logger
	name  string
	args  []interface{}
	level hclog.Level
}

var _ hclog.Logger = (*Logger)(nil)

// New returns an adapter over l named name (the "component" attribute; empty for none).
func New(l *slog.Logger, name string) *Logger {
	a := &Logger{l: l, name: name, level: hclog.Info}
	if name != "" {
		a.l = l.With("component", name)
	}
	return a
}

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// routine holds messages hashicorp/raft logs at Info or Warn that the datastore's normal course
// produces, written at Debug instead: the first election of a split's new group asks voters
// whose vote for the candidate was recorded ahead (partition.PrepareSplitReplica), which raft
// reports as a repeated vote request, once per voter and split.
var routine = map[string]bool{
	"duplicate requestVote for same term": true,
	"duplicate requestVote from":          true,
}

// Log writes msg with key/value args at level (Debug for a routine message).
func (a *Logger) Log(level hclog.Level, msg string, args ...interface{}) {
	l := toSlog(level)
	if l > slog.LevelDebug && routine[msg] {
		l = slog.LevelDebug
	}
	a.l.Log(context.Background(), l, msg, args...)
}

// Trace logs at slog.LevelDebug-4.
func (a *Logger) Trace(msg string, args ...interface{}) { a.Log(hclog.Trace, msg, args...) }

// Debug logs at slog.LevelDebug.
func (a *Logger) Debug(msg string, args ...interface{}) { a.Log(hclog.Debug, msg, args...) }

// Info logs at slog.LevelInfo.
func (a *Logger) Info(msg string, args ...interface{}) { a.Log(hclog.Info, msg, args...) }

// Warn logs at slog.LevelWarn.
func (a *Logger) Warn(msg string, args ...interface{}) { a.Log(hclog.Warn, msg, args...) }

// Error logs at slog.LevelError.
func (a *Logger) Error(msg string, args ...interface{}) { a.Log(hclog.Error, msg, args...) }

func (a *Logger) enabled(level hclog.Level) bool {
	return a.l.Enabled(context.Background(), toSlog(level))
}

// IsTrace reports whether trace records are written.
func (a *Logger) IsTrace() bool { return a.enabled(hclog.Trace) }

// IsDebug reports whether debug records are written.
func (a *Logger) IsDebug() bool { return a.enabled(hclog.Debug) }

// IsInfo reports whether info records are written.
func (a *Logger) IsInfo() bool { return a.enabled(hclog.Info) }

// IsWarn reports whether warnings are written.
func (a *Logger) IsWarn() bool { return a.enabled(hclog.Warn) }

// IsError reports whether errors are written.
func (a *Logger) IsError() bool { return a.enabled(hclog.Error) }

// ImpliedArgs returns the args added by With.
func (a *Logger) ImpliedArgs() []interface{} { return a.args }

// With returns a logger adding args to every record.
func (a *Logger) With(args ...interface{}) hclog.Logger {
	c := *a
	c.l = a.l.With(args...)
	c.args = append(append([]interface{}{}, a.args...), args...)
	return &c
}

// Name returns the logger's name.
func (a *Logger) Name() string { return a.name }

// Named returns a logger whose name is this one's plus "." plus name.
func (a *Logger) Named(name string) hclog.Logger {
	full := name
	if a.name != "" {
		full = a.name + "." + name
	}
	c := *a
	c.name = full
	c.l = a.l.With("subcomponent", name)
	return &c
}

// ResetNamed returns a logger named name.
func (a *Logger) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

// SetLevel records level; filtering is left to the slog handler.
func (a *Logger) SetLevel(level hclog.Level) { a.level = level }

// GetLevel returns the level last set (Info by default).
func (a *Logger) GetLevel() hclog.Level { return a.level }

// StandardLogger returns a *log.Logger writing each line as an info record.
func (a *Logger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer turning each write into an info record.
func (a *Logger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer { return writer{a} }

type writer struct{ a *Logger }

func (w writer) Write(p []byte) (int, error) {
	w.a.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
