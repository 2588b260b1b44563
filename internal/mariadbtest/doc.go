// Package mariadbtest gives tests a MariaDB (or MySQL) server and replicated sets, built on the
// launcher in internal/mariadb.
//
// DSN returns the DSN of a server for the test, in this order: the environment variable
// SCHEMALESS_TEST_MYSQL_DSN; root@tcp(127.0.0.1:3306)/ if it answers a ping within 2 s; a
// throwaway instance started once per test process (mariadb.Start) from the installed mariadbd
// (or mysqld) and mariadb-install-db (or mysql_install_db). If none is available the test is
// skipped, except when the environment says CI=true, where it fails: CI must not silently skip
// the MySQL half of a suite. RequireServerBinary does the same for tests that start servers of
// their own.
//
// Prefix returns a fresh database prefix for one test and drops every database it names when
// the test ends, so tests sharing a server do not see each other's data. SharedReplicated and
// ReplicatedPrefix do the same for async-mode tests on one replicated set per process.
//
// A package whose tests may start the shared instance or the shared replicated set calls Main
// from TestMain, which stops them and removes their data directories when the tests are done:
//
//	func TestMain(m *testing.M) { mariadbtest.Main(m) }
//
// Without Main, the servers still die with the test process (Linux parent-death signal), but
// their data directories under os.TempDir are left behind.
//
// Code that is not a test (the shipped binary, the jepsen harness) uses internal/mariadb
// directly: this package imports testing.
package mariadbtest
