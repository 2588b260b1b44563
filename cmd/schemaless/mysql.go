package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/schemaless-db/schemaless/cluster"
)

// dropDevDatabases drops the MySQL databases of every node of top (prefix sl_<node>_), so that
// `dev --fresh --mysql` starts empty.
func dropDevDatabases(ctx context.Context, dsn string, top *cluster.Topology) error {
	var prefixes []string
	for _, n := range top.Nodes {
		prefixes = append(prefixes, "sl_"+sanitizePrefix(n.ID)+"_")
	}
	return dropDatabases(ctx, dsn, prefixes)
}

// dropDatabases drops every database of the server at dsn whose name starts with one of
// prefixes.
func dropDatabases(ctx context.Context, dsn string, prefixes []string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("--mysql: %w", err)
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW DATABASES")
	if err != nil {
		return fmt.Errorf("--mysql: %w", err)
	}
	var drop []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				drop = append(drop, name)
				break
			}
		}
	}
	rows.Close()
	for _, name := range drop {
		if _, err := db.ExecContext(ctx, "DROP DATABASE `"+name+"`"); err != nil {
			return fmt.Errorf("drop %s: %w", name, err)
		}
	}
	return nil
}
