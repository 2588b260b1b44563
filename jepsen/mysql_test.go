package jepsen

import (
	"context"
	"database/sql"
	"testing"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

// dropDatabases removes a run's databases (prefix_...) and nothing else.
func TestDropDatabases(t *testing.T) {
	dsn := mariadbtest.DSN(t)
	prefix := mariadbtest.Prefix(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	names := []string{prefix + "_n1_cells_0000", prefix + "_n2_meta", prefix + "x_other"}
	for _, n := range names {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+n+"`"); err != nil {
			t.Fatal(err)
		}
	}
	if err := dropDatabases(dsn, prefix); err != nil {
		t.Fatalf("dropDatabases: %v", err)
	}
	for i, n := range names {
		var got string
		err := db.QueryRowContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", n).Scan(&got)
		exists := err == nil
		if want := i == 2; exists != want {
			t.Errorf("database %s exists = %v, want %v", n, exists, want)
		}
	}
	if _, err := db.ExecContext(ctx, "DROP DATABASE `"+names[2]+"`"); err != nil {
		t.Fatal(err)
	}
}
