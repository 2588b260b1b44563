package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// sqliteIndexTable is the SQLite name of index table name on shard.
func sqliteIndexTable(name string, shard int) string {
	return fmt.Sprintf("index_%s_%04d", name, shard)
}

// sqliteIndexDDL returns the statements creating t's table on shard: a WITHOUT ROWID table
// keyed by row_key, and one B-tree per column so that every order of QueryIndex is an index
// scan: (f_0, row_key), then (f_0, f_i, row_key). Each column carries its kind in a comment,
// which SQLite keeps in sqlite_master: the stored definition tells IndexInt from
// IndexDatetime even though both are INTEGER.
func sqliteIndexDDL(t *IndexTable, shard int) []string {
	tbl := sqliteIndexTable(t.Name, shard)
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(tbl)
	b.WriteString(" (\n\trow_key BLOB NOT NULL PRIMARY KEY,\n")
	for _, c := range t.Columns {
		typ := "INTEGER"
		switch c.Kind {
		case IndexUUID:
			typ = "BLOB"
		case IndexString:
			typ = "TEXT COLLATE BINARY"
		case IndexFloat:
			// REAL in a STRICT table also accepts integers, converted to REAL.
			typ = "REAL"
		}
		fmt.Fprintf(&b, "\tf_%s %s /* %s */,\n", c.Name, typ, c.Kind)
	}
	b.WriteString("\trefs BLOB NOT NULL,\n\tviolation_ref INTEGER NOT NULL DEFAULT 0\n) STRICT, WITHOUT ROWID")
	stmts := []string{b.String()}
	f0 := "f_" + t.Columns[0].Name
	stmts = append(stmts, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s_by_0 ON %s (%s, row_key)", tbl, tbl, f0))
	for i := 1; i < len(t.Columns); i++ {
		stmts = append(stmts, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s_by_%d ON %s (%s, f_%s, row_key)", tbl, i, tbl, f0, t.Columns[i].Name))
	}
	return stmts
}

// sqliteIndexDef is the definition SQLite stores in sqlite_master for the table of t: the
// CREATE TABLE statement without IF NOT EXISTS.
func sqliteIndexDef(t *IndexTable) string {
	return normalizeSQLiteDef(sqliteIndexDDL(t, 0)[0])
}

// normalizeSQLiteDef removes what varies between a CREATE TABLE statement of an index table
// and its copy in sqlite_master: IF NOT EXISTS and the table's name (which holds the shard).
func normalizeSQLiteDef(s string) string {
	s = strings.Replace(s, "CREATE TABLE IF NOT EXISTS ", "CREATE TABLE ", 1)
	if i := strings.Index(s, " ("); i >= 0 && strings.HasPrefix(s, "CREATE TABLE ") {
		s = "CREATE TABLE" + s[i:]
	}
	return s
}

// mysqlIndexDDL returns the statements creating t's table in the database of a shard (db,
// quoted): the database if missing, then the table. Each field column carries its kind as
// its COMMENT, read back by the definition check.
func mysqlIndexDDL(t *IndexTable, db string) []string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(db)
	b.WriteString(".`index_")
	b.WriteString(t.Name)
	b.WriteString("` (\n\trow_key BINARY(16) NOT NULL,\n")
	for _, c := range t.Columns {
		fmt.Fprintf(&b, "\t`f_%s` %s NULL COMMENT '%s',\n", c.Name, mysqlIndexType(c.Kind), c.Kind)
	}
	b.WriteString("\trefs MEDIUMBLOB NOT NULL,\n\tviolation_ref BIGINT NOT NULL DEFAULT 0,\n\tPRIMARY KEY (row_key),\n")
	f0 := "`f_" + t.Columns[0].Name + "`"
	fmt.Fprintf(&b, "\tKEY by_0 (%s, row_key)", f0)
	for i := 1; i < len(t.Columns); i++ {
		fmt.Fprintf(&b, ",\n\tKEY by_%d (%s, `f_%s`, row_key)", i, f0, t.Columns[i].Name)
	}
	b.WriteString("\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + db + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		b.String(),
	}
}

// mysqlIndexType is the MySQL column type of a kind.
func mysqlIndexType(k IndexKind) string {
	switch k {
	case IndexUUID:
		return "BINARY(16)"
	case IndexString:
		return fmt.Sprintf("VARBINARY(%d)", MaxIndexStringBytes)
	case IndexFloat:
		return "DOUBLE"
	case IndexBool:
		return "TINYINT"
	}
	return "BIGINT"
}

// mysqlIndexDef is the definition of t's table as read back from information_schema.columns
// by indexDefs: one line "<column> <data_type> <comment>" per column.
func mysqlIndexDef(t *IndexTable) string {
	lines := []string{"row_key binary "}
	for _, c := range t.Columns {
		typ := strings.ToLower(mysqlIndexType(c.Kind))
		if i := strings.IndexByte(typ, '('); i >= 0 {
			typ = typ[:i]
		}
		lines = append(lines, "f_"+c.Name+" "+typ+" "+c.Kind.String())
	}
	lines = append(lines, "refs mediumblob ", "violation_ref bigint ")
	return strings.Join(lines, "\n")
}

// defDiff names the first line where the stored definition of a table differs from the one
// wanted.
func defDiff(stored, want string) string {
	s, w := strings.Split(stored, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(s), len(w)); i++ {
		switch {
		case i >= len(s):
			return fmt.Sprintf("stored definition lacks %q", strings.TrimSpace(w[i]))
		case i >= len(w):
			return fmt.Sprintf("stored definition has %q too", strings.TrimSpace(s[i]))
		case s[i] != w[i]:
			return fmt.Sprintf("stored %q where the definition wants %q", strings.TrimSpace(s[i]), strings.TrimSpace(w[i]))
		}
	}
	return "definitions differ"
}

// EnsureIndex creates the table of t on each of shards where it is missing, with its SQL
// indexes. It is a writer call, like EnsureShards: it runs outside a write transaction (MySQL
// DDL commits implicitly) and returns ErrTxOpen if one is open. An invalid t returns
// ErrInvalidConfig, a shard outside the range ErrShardRange, both before any I/O. Creating is
// idempotent and remembered: a call for tables known to exist costs no I/O. The first time
// the partition meets the index (per PartitionStore) it reads the definitions of its tables on
// every shard of the range from the catalog and compares them with t's: when the columns
// (names, SQL types or kinds) differ it returns an error wrapping ErrInvalidConfig that names
// the first difference, and creates nothing; t.Name must then be replaced (callers version
// their names), not reused. Later calls with another definition for the name are refused the
// same way, without I/O. In SQLite the missing tables are created in one transaction; in
// MySQL one statement at a time, so an error may leave some created (harmless: empty). The
// shards' entity tables are neither created nor needed. It blocks on I/O until ctx is done.
func (p *PartitionStore) EnsureIndex(ctx context.Context, t IndexTable, shards []int) error {
	if err := t.Validate(); err != nil {
		return err
	}
	for _, s := range shards {
		if err := p.checkShard(s); err != nil {
			return err
		}
	}
	if err := p.lockWriter(); err != nil {
		return err
	}
	defer p.unlockWriter()
	return p.ensureIndexLocked(ctx, &t, shards)
}

// ensureIndexLocked is EnsureIndex once validated; the caller holds the writer token.
func (p *PartitionStore) ensureIndexLocked(ctx context.Context, t *IndexTable, shards []int) error {
	sig := t.signature()
	st := p.indexes[t.Name]
	if st != nil && st.sig != sig {
		return fmt.Errorf("%w: index table %s exists with columns (%s), not (%s)", ErrInvalidConfig, t.Name, st.sig, sig)
	}
	var missing []int
	seen := make(map[int]bool, len(shards))
	for _, s := range shards {
		if (st == nil || !st.shards[s]) && !seen[s] {
			missing = append(missing, s)
			seen[s] = true
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// The first time the index is met, check its tables on every shard of the range, so that
	// a table created now matches those that exist on other shards.
	check := missing
	if st == nil {
		check = make([]int, 0, p.Shards().Len())
		for s := p.Shards().First; s <= p.Shards().Last; s++ {
			check = append(check, s)
		}
	}
	var defs map[int]string
	var err error
	if p.pb != nil {
		defs, err = p.pb.indexDefs(p.pb.db, t.Name, check)
	} else {
		defs, err = p.indexDefs(ctx, p.write, t.Name, check)
	}
	if err != nil {
		return p.fail(fmt.Sprintf("read the definition of index table %s", t.Name), err)
	}
	want := p.d.indexDef(t)
	for _, s := range check {
		if def, ok := defs[s]; ok && def != want {
			return fmt.Errorf("%w: index table %s of shard %d exists with other columns than (%s): %s", ErrInvalidConfig, t.Name, s, sig, defDiff(def, want))
		}
	}
	if st == nil {
		st = &indexState{sig: sig, shards: make(map[int]bool)}
		p.indexes[t.Name] = st
	}
	var create []int
	for _, s := range check {
		if _, ok := defs[s]; ok {
			st.shards[s] = true
		}
	}
	for _, s := range missing {
		if !st.shards[s] {
			create = append(create, s)
		}
	}
	if len(create) == 0 {
		return nil
	}
	if p.pb != nil {
		if err := p.pebbleCreateIndex(t, create); err != nil {
			return p.fail("create index tables", err)
		}
		for _, s := range create {
			st.shards[s] = true
		}
		return nil
	}
	if p.d.engine == EngineSQLite {
		tx, err := p.write.BeginTx(ctx, nil)
		if err != nil {
			return p.fail("create index tables", err)
		}
		defer tx.Rollback()
		for _, s := range create {
			for _, stmt := range p.d.indexDDL(t, s) {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return p.fail(fmt.Sprintf("create index table %s of shard %d", t.Name, s), err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			return p.fail("create index tables", err)
		}
		for _, s := range create {
			st.shards[s] = true
		}
		return nil
	}
	for _, s := range create {
		for _, stmt := range p.d.indexDDL(t, s) {
			if _, err := p.write.ExecContext(ctx, stmt); err != nil {
				return p.fail(fmt.Sprintf("create index table %s of shard %d", t.Name, s), err)
			}
		}
		st.shards[s] = true
	}
	return nil
}

// DropIndex drops the table of index name on every shard of the range where it exists (DROP
// TABLE IF EXISTS) and forgets it; dropping an index with no table is not an error. The
// tables of other indexes and the entity tables are untouched. It is a writer call, like
// EnsureIndex (ErrTxOpen while a write transaction is open). An invalid name returns
// ErrInvalidConfig. In SQLite the tables are dropped in one transaction; in MySQL the DROP
// waits for open snapshots that have read one of the tables (metadata lock) and an error may
// leave some tables dropped. It blocks until done or ctx is done.
func (p *PartitionStore) DropIndex(ctx context.Context, name string) error {
	if !validIndexName(name) {
		return fmt.Errorf("%w: index table name %q must match [a-z][a-z0-9_]{0,%d}", ErrInvalidConfig, name, maxIndexNameLen-1)
	}
	if p.closed.Load() {
		return ErrClosed
	}
	if err := p.lockWriter(); err != nil {
		return err
	}
	defer p.unlockWriter()
	tables, err := p.indexTables(ctx, p.write)
	if err != nil {
		return p.fail("list index tables", err)
	}
	return p.dropIndexLocked(ctx, name, tables[name])
}

// dropIndexLocked drops the table of index name on shards and forgets the index; the caller
// holds the writer token.
func (p *PartitionStore) dropIndexLocked(ctx context.Context, name string, shards []int) error {
	// Forget first: after an error, the next EnsureIndex checks the catalog again.
	delete(p.indexes, name)
	if p.pb != nil {
		if err := p.pebbleDropIndex(name); err != nil {
			return p.fail("drop index tables", err)
		}
		return nil
	}
	if len(shards) == 0 {
		return nil
	}
	if p.d.engine == EngineSQLite {
		tx, err := p.write.BeginTx(ctx, nil)
		if err != nil {
			return p.fail("drop index tables", err)
		}
		defer tx.Rollback()
		for _, s := range shards {
			if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+p.d.indexTable(name, s)); err != nil {
				return p.fail(fmt.Sprintf("drop index table %s of shard %d", name, s), err)
			}
		}
		if err := tx.Commit(); err != nil {
			return p.fail("drop index tables", err)
		}
		return nil
	}
	const perStatement = 100
	for start := 0; start < len(shards); start += perStatement {
		chunk := shards[start:min(start+perStatement, len(shards))]
		names := make([]string, len(chunk))
		for i, s := range chunk {
			names[i] = p.d.indexTable(name, s)
		}
		if _, err := p.write.ExecContext(ctx, "DROP TABLE IF EXISTS "+strings.Join(names, ", ")); err != nil {
			return p.fail(fmt.Sprintf("drop index tables %s of shards %d to %d", name, chunk[0], chunk[len(chunk)-1]), err)
		}
	}
	return nil
}

// IndexNames returns the names of the index tables that exist on any shard of the partition's
// range, sorted, from the engine's catalog (SQLite: sqlite_master; MySQL:
// information_schema.tables); nil if there are none. It is a writer call, like EnsureIndex
// (ErrTxOpen while a write transaction is open), so that it sees the writer's DDL. It blocks
// on I/O until ctx is done.
func (p *PartitionStore) IndexNames(ctx context.Context) ([]string, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if err := p.lockWriter(); err != nil {
		return nil, err
	}
	defer p.unlockWriter()
	tables, err := p.indexTables(ctx, p.write)
	if err != nil {
		return nil, p.fail("list index tables", err)
	}
	return sortedNames(tables), nil
}

func sortedNames(tables map[string][]int) []string {
	var names []string
	for n := range tables {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// indexTables lists the index tables of the partition from the catalog, by index name: the
// shards of the range holding one, ascending. Tables of shards outside the range (a SQLite
// file or MySQL databases left by another range) are left out.
func (p *PartitionStore) indexTables(ctx context.Context, db queryer) (map[string][]int, error) {
	if p.pb != nil {
		return p.pb.indexTables(p.pb.db, p.Shards().Contains)
	}
	out := make(map[string][]int)
	add := func(name string, shard int) {
		if validIndexName(name) && p.Shards().Contains(shard) {
			out[name] = append(out[name], shard)
		}
	}
	if p.d.engine == EngineSQLite {
		rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'index\_%' ESCAPE '\'`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var tbl string
			if err := rows.Scan(&tbl); err != nil {
				return nil, err
			}
			// index_<name>_<4 digits>
			rest := strings.TrimPrefix(tbl, "index_")
			if len(rest) < 6 || rest[len(rest)-5] != '_' {
				continue
			}
			if s, ok := shardDigits(rest[len(rest)-4:]); ok {
				add(rest[:len(rest)-5], s)
			}
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	} else {
		base := strings.TrimSuffix(p.d.database(0), "0000")
		rows, err := db.QueryContext(ctx, "SELECT table_schema, table_name FROM information_schema.tables "+
			"WHERE table_schema LIKE ? AND table_name LIKE ?", likeEscape(base)+"____", `index\_%`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var schema, tbl string
			if err := rows.Scan(&schema, &tbl); err != nil {
				return nil, err
			}
			if s, ok := shardDigits(strings.TrimPrefix(schema, base)); ok && strings.HasPrefix(schema, base) {
				add(strings.TrimPrefix(tbl, "index_"), s)
			}
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	for _, shards := range out {
		slices.Sort(shards)
	}
	return out, nil
}

// shardDigits parses a shard number written with exactly 4 digits.
func shardDigits(s string) (int, bool) {
	if len(s) != 4 {
		return 0, false
	}
	n := 0
	for i := 0; i < 4; i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// likeEscape escapes the LIKE wildcards of s (with the default escape character '\').
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "_", `\_`, "%", `\%`).Replace(s)
}

// indexDefs reads the stored definitions of the tables of index name on shards, in the form of
// dialect.indexDef; shards without the table are absent.
func (p *PartitionStore) indexDefs(ctx context.Context, db queryer, name string, shards []int) (map[int]string, error) {
	out := make(map[int]string)
	const perStatement = 500
	for start := 0; start < len(shards); start += perStatement {
		chunk := shards[start:min(start+perStatement, len(shards))]
		args := make([]any, 0, len(chunk)+1)
		byName := make(map[string]int, len(chunk))
		for _, s := range chunk {
			var key string
			if p.d.engine == EngineSQLite {
				key = sqliteIndexTable(name, s)
			} else {
				key = p.d.database(s)
			}
			byName[key] = s
			args = append(args, key)
		}
		marks := "?" + strings.Repeat(", ?", len(chunk)-1)
		if p.d.engine == EngineSQLite {
			rows, err := db.QueryContext(ctx, "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN ("+marks+")", args...)
			if err != nil {
				return nil, err
			}
			for rows.Next() {
				var tbl, def string
				if err := rows.Scan(&tbl, &def); err != nil {
					rows.Close()
					return nil, err
				}
				out[byName[tbl]] = normalizeSQLiteDef(def)
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return nil, err
			}
			continue
		}
		args = append(args, "index_"+name)
		rows, err := db.QueryContext(ctx, "SELECT table_schema, column_name, data_type, column_comment FROM information_schema.columns "+
			"WHERE table_schema IN ("+marks+") AND table_name = ? ORDER BY table_schema, ordinal_position", args...)
		if err != nil {
			return nil, err
		}
		lines := make(map[int][]string)
		for rows.Next() {
			var schema, col, typ, comment string
			if err := rows.Scan(&schema, &col, &typ, &comment); err != nil {
				rows.Close()
				return nil, err
			}
			s := byName[schema]
			lines[s] = append(lines[s], col+" "+strings.ToLower(typ)+" "+comment)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
		for s, l := range lines {
			out[s] = strings.Join(l, "\n")
		}
	}
	return out, nil
}
