package membership

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// logBridge is an io.Writer for memberlist's *log.Logger: each line ("[LEVEL] memberlist: msg")
// becomes one slog record, [DEBUG] and [INFO] at debug level, [WARN] and [ERR] at warn level
// (membership is a hint: memberlist's errors, mostly failed probes of a dead node, are not the
// node's errors).
type logBridge struct{ logger *slog.Logger }

func newLogBridge(l *slog.Logger) *log.Logger {
	return log.New(logBridge{l.With("component", "memberlist")}, "", 0)
}

func (b logBridge) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		level, msg := slog.LevelDebug, line
		for _, t := range []struct {
			tag   string
			level slog.Level
		}{{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelDebug}, {"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelWarn}} {
			if rest, ok := strings.CutPrefix(line, t.tag); ok {
				level, msg = t.level, strings.TrimSpace(rest)
				break
			}
		}
		msg = strings.TrimPrefix(msg, "memberlist: ")
		b.logger.Log(context.Background(), level, msg)
	}
	return len(p), nil
}
