package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/schemaless-db/schemaless/replication"
)

// DropPrefix drops every database of the server at dsn whose name starts with prefix+"_".
// A database still locked by an open transaction fails the drop after 10 s rather than
// blocking. A prefix holding a quote, a backquote, a backslash or % is refused.
func DropPrefix(ctx context.Context, dsn, prefix string) error {
	if prefix == "" || strings.ContainsAny(prefix, "`%\\'") {
		return fmt.Errorf("mariadb: bad prefix %q", prefix)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.DBName = ""
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "SET SESSION lock_wait_timeout = 10"); err != nil {
		return err
	}
	rows, err := c.QueryContext(ctx, "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE ?",
		strings.ReplaceAll(prefix, "_", `\_`)+`\_%`)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range names {
		if _, err := c.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+n+"`"); err != nil {
			return fmt.Errorf("drop %s: %w", n, err)
		}
	}
	return nil
}

// DropPrefix drops the databases of prefix (as the package-level DropPrefix) on the current
// master of cluster, the running member that is writable and replicates from nobody; the drops
// replicate to the minions. A cluster with no such member is left alone.
func (s *ReplicatedSet) DropPrefix(ctx context.Context, cluster int, prefix string) error {
	s.mu.Lock()
	n := len(s.Clusters[cluster].Instances)
	s.mu.Unlock()
	for m := range n {
		dsn := s.AdminDSN(cluster, m)
		db, err := replication.Open(dsn)
		if err != nil {
			return err
		}
		st, err := replication.Probe(ctx, db, dsn)
		db.Close()
		if err != nil || !st.IsMaster() {
			continue
		}
		return DropPrefix(ctx, dsn, prefix)
	}
	return nil
}
