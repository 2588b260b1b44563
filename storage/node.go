package storage

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// NodePrefix is the default MySQLConfig.Prefix of node id (serve --mysql without
// --mysql-prefix): "sl_" and the id with every character outside [a-z0-9_] replaced by '_',
// cut to MaxPrefixLen bytes, so that nodes sharing a server keep their databases apart.
func NodePrefix(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	p := "sl_" + string(b)
	return p[:min(len(p), MaxPrefixLen)]
}

// SetDriverLogger sends what go-sql-driver/mysql logs (dropped connections and protocol
// errors, which it retries or returns) to logger, at Warn (before any call: to slog.Default()).
// The driver's logger is one per process: the last call wins. Safe for concurrent use, also
// with the driver's work: the driver's logger is set once, at init, to one that reads the
// logger this stores.
func SetDriverLogger(logger *slog.Logger) {
	driverLog.Store(logger)
}

// driverLog is the logger of the driver's lines (nil: slog.Default()).
var driverLog atomic.Pointer[slog.Logger]

func init() {
	// Here, before any goroutine of the program can use the driver: SetLogger writes a
	// variable the driver reads without synchronization.
	_ = mysql.SetLogger(driverLogger{})
}

// driverLogger is go-sql-driver/mysql's Logger over slog.
type driverLogger struct{}

// Print logs v, formatted as fmt.Sprint does, at Warn.
func (driverLogger) Print(v ...any) {
	l := driverLog.Load()
	if l == nil {
		l = slog.Default()
	}
	l.Warn(fmt.Sprint(v...))
}
