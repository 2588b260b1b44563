package storage

import (
	"fmt"
	"log/slog"

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
// errors, which it retries or returns) to logger, at Warn. The driver's logger is one per
// process: the last call wins.
func SetDriverLogger(logger *slog.Logger) {
	_ = mysql.SetLogger(driverLogger{logger})
}

// driverLogger is go-sql-driver/mysql's Logger over slog.
type driverLogger struct{ l *slog.Logger }

// Print logs v, formatted as fmt.Sprint does, at Warn.
func (d driverLogger) Print(v ...any) { d.l.Warn(fmt.Sprint(v...)) }
