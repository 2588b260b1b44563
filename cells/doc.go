// Package cells holds the pure data types of the datastore: the immutable cell, its key, the
// validation rules for keys and bodies, the stored body codec (MessagePack, then zlib) and the
// stable shard hash.
//
// A cell is addressed by (row key, column key, ref key): a UUID, a short identifier and a
// non-negative 64-bit integer. Its body is a JSON object. A cell is never overwritten; a newer
// version of a column is a new cell with a higher ref key.
//
// The package imports nothing else of the project and does no I/O.
package cells
