// Package mariadbtest gives tests a MariaDB (or MySQL) server: the one configured or running
// locally, or a throwaway instance it starts itself.
//
// DSN returns the DSN of a server for the test, in this order: the environment variable
// SCHEMALESS_TEST_MYSQL_DSN; root@tcp(127.0.0.1:3306)/ if it answers a ping within 2 s; a
// throwaway instance started once per test process from the installed mariadbd (or mysqld)
// and mariadb-install-db (or mysql_install_db), looked up in PATH and the usual sbin
// directories. If none is available the test is skipped, except when the environment says
// CI=true, where it fails: CI must not silently skip the MySQL half of a suite.
//
// Prefix returns a fresh database prefix for one test and drops every database it names when
// the test ends, so tests sharing a server do not see each other's data.
//
// A package whose tests may start the shared instance calls Main from TestMain, which stops
// the instance and removes its data directory when the tests are done:
//
//	func TestMain(m *testing.M) { mariadbtest.Main(m) }
//
// Without Main, the instance still dies with the test process (Linux parent-death signal), but
// its data directory under os.TempDir is left behind.
//
// Start runs a throwaway server with its own data directory, port and flags (for replication
// and fault tests: log-bin, server-id, read-only, ...) and returns an *Instance to stop or kill.
// A started server's error log is kept in its data directory (error.log, plus console.log for
// what it writes to stdout and stderr); startup errors quote its tail. Each server gets a
// private tmpdir: at startup a server deletes every "#sql*" file of its tmpdir, which in a
// shared /tmp would be the live temporary tables of other servers.
//
// Servers started here are for tests only: root has no password, durability is relaxed
// (innodb_flush_log_at_trx_commit=2) unless Options.Args says otherwise.
package mariadbtest
