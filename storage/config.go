package storage

import (
	"errors"
	"fmt"
	"strings"

	"github.com/schemaless-db/schemaless/cells"
)

// Defaults applied by OpenSQLite and OpenMySQL to zero fields.
const (
	// DefaultSQLiteReadConns is SQLiteConfig.ReadConns when zero.
	DefaultSQLiteReadConns = 4
	// DefaultSQLiteCacheKiB is SQLiteConfig.CacheKiB when zero: SQLite's own default page cache
	// of 2,000 KiB, for a partition's write connection.
	DefaultSQLiteCacheKiB = 2000
	// DefaultSQLiteReadCacheKiB is SQLiteConfig.ReadCacheKiB when zero.
	DefaultSQLiteReadCacheKiB = 512
	// DefaultSQLiteWALCheckpointPages is SQLiteConfig.WALCheckpointPages when zero.
	DefaultSQLiteWALCheckpointPages = 4096
	// DefaultSQLiteSynchronous is SQLiteConfig.Synchronous when empty.
	DefaultSQLiteSynchronous = "NORMAL"
	// DefaultMySQLMaxOpenConns is MySQLConfig.MaxOpenConns when zero.
	DefaultMySQLMaxOpenConns = 32
	// MaxPrefixLen is the longest MySQLConfig.Prefix, in bytes.
	MaxPrefixLen = 16
	// MaxDatastoreNameLen is the longest datastore name, in bytes (cells.MaxDatastoreNameLen).
	MaxDatastoreNameLen = cells.MaxDatastoreNameLen
)

// withDefaults returns c with zero fields set to their defaults.
func (c SQLiteConfig) withDefaults() SQLiteConfig {
	if c.Synchronous == "" {
		c.Synchronous = DefaultSQLiteSynchronous
	}
	c.Synchronous = strings.ToUpper(c.Synchronous)
	if c.ReadConns == 0 {
		c.ReadConns = DefaultSQLiteReadConns
	}
	if c.CacheKiB == 0 {
		c.CacheKiB = DefaultSQLiteCacheKiB
	}
	if c.ReadCacheKiB == 0 {
		c.ReadCacheKiB = DefaultSQLiteReadCacheKiB
	}
	if c.WALCheckpointPages == 0 {
		c.WALCheckpointPages = DefaultSQLiteWALCheckpointPages
	}
	return c
}

// Validate reports every invalid field of c (after defaults are applied to zero fields), each
// wrapping ErrInvalidConfig, joined with errors.Join; nil if c is valid.
func (c SQLiteConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Dir == "" {
		errs = append(errs, fmt.Errorf("%w: sqlite: Dir is empty", ErrInvalidConfig))
	}
	switch c.Synchronous {
	case "NORMAL", "FULL", "EXTRA":
	default:
		errs = append(errs, fmt.Errorf("%w: sqlite: Synchronous %q is not NORMAL, FULL or EXTRA", ErrInvalidConfig, c.Synchronous))
	}
	if c.ReadConns < 1 {
		errs = append(errs, fmt.Errorf("%w: sqlite: ReadConns %d is not positive", ErrInvalidConfig, c.ReadConns))
	}
	if c.CacheKiB < 64 {
		errs = append(errs, fmt.Errorf("%w: sqlite: CacheKiB %d is below 64", ErrInvalidConfig, c.CacheKiB))
	}
	if c.ReadCacheKiB < 64 {
		errs = append(errs, fmt.Errorf("%w: sqlite: ReadCacheKiB %d is below 64", ErrInvalidConfig, c.ReadCacheKiB))
	}
	if c.WALCheckpointPages < 100 {
		errs = append(errs, fmt.Errorf("%w: sqlite: WALCheckpointPages %d is below 100", ErrInvalidConfig, c.WALCheckpointPages))
	}
	return errors.Join(errs...)
}

// withDefaults returns c with zero fields set to their defaults.
func (c MySQLConfig) withDefaults() MySQLConfig {
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = DefaultMySQLMaxOpenConns
	}
	return c
}

// Validate reports every invalid field of c (after defaults are applied to zero fields), each
// wrapping ErrInvalidConfig, joined with errors.Join; nil if c is valid. It does not parse the
// DSN; OpenMySQL does.
func (c MySQLConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.DSN == "" {
		errs = append(errs, fmt.Errorf("%w: mysql: DSN is empty", ErrInvalidConfig))
	}
	if !validPrefix(c.Prefix) {
		errs = append(errs, fmt.Errorf("%w: mysql: Prefix %q must match [a-z0-9_]{1,%d}", ErrInvalidConfig, c.Prefix, MaxPrefixLen))
	}
	if c.MaxOpenConns < 2 {
		// One connection is held by each open snapshot; a single connection would deadlock
		// reads behind a snapshot.
		errs = append(errs, fmt.Errorf("%w: mysql: MaxOpenConns %d is below 2", ErrInvalidConfig, c.MaxOpenConns))
	}
	return errors.Join(errs...)
}

// validPrefix reports whether s matches [a-z0-9_]{1,16}.
func validPrefix(s string) bool {
	if len(s) == 0 || len(s) > MaxPrefixLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ValidateDatastoreName reports whether name is a valid datastore name, [a-z][a-z0-9_]{0,31}:
// it becomes part of database and file names. The error wraps ErrInvalidConfig.
func ValidateDatastoreName(name string) error {
	if !cells.ValidDatastoreName(name) {
		return fmt.Errorf("%w: datastore name %q must match [a-z][a-z0-9_]{0,%d}", ErrInvalidConfig, name, MaxDatastoreNameLen-1)
	}
	return nil
}

// validatePartition checks a partition id and its shard range.
func validatePartition(id PartitionID, shards cells.ShardRange) error {
	if err := ValidateDatastoreName(id.Datastore); err != nil {
		return err
	}
	if id.Partition < 0 {
		return fmt.Errorf("%w: partition %d is negative", ErrInvalidConfig, id.Partition)
	}
	if shards.First < 0 || shards.Last < shards.First || shards.Last > maxShard {
		return fmt.Errorf("%w: shard range [%d, %d] is not within [0, %d]", ErrInvalidConfig, shards.First, shards.Last, maxShard)
	}
	return nil
}

// maxShard is the highest shard number (cells.MaxShards - 1): shard numbers are written with 4
// digits in table and database names.
const maxShard = cells.MaxShards - 1
