// Package cells holds the pure data types of the datastore: the immutable cell, its key, the
// validation rules for keys and bodies, the stored body codec (MessagePack, then zlib) and the
// stable shard hash.
//
// A cell is addressed by (row key, column key, ref key): a UUID, a short identifier and a
// non-negative 64-bit integer. Its body is a JSON object. A cell is never overwritten; a newer
// version of a column is a new cell with a higher ref key.
//
// A body's JSON text and its MessagePack are transcoded into each other directly, in one pass
// without a Go value per JSON value (textpack.go, packtext.go). Whatever a direct transcoder is
// not sure of (errors, unusual shapes) takes the decoding path instead: encoding/json and
// msgpack through Go values, which defines the stored bytes, the errors and the text read back;
// the differential tests and fuzz targets hold the two paths to the same bytes.
//
// The package imports nothing else of the project but internal/jsontext (JSON strings written
// as encoding/json writes them) and does no I/O.
package cells
