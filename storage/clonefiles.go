package storage

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// The file copy of a SQLite split (cloneSQLite) copies what the clone needs, not the files'
// whole size: the pages of the parent's file that are free in its current state (SQLite keeps
// a dropped table's pages as free pages, so every file of a lineage of splits would otherwise
// keep the size of the first) are left as holes, and of its write-ahead log only the frames of
// its current generation. Both follow SQLite's file format (sqlite.org/fileformat2.html): the
// freelist is a chain of trunk pages from the page number at offset 32 of the header, each
// holding the next trunk's number, a count and that many free leaf pages; SQLite never reads a
// free leaf page's content before it rewrites it. A log is a 32-byte header (magic, version,
// page size, checkpoint sequence, two salts, checksum) and frames of a 24-byte header (page,
// commit size, the two salts, checksum) and a page; the frames of the log's current generation
// carry the header's salts, and opening the copy replays those that end in a commit, as after
// a crash.

// rowQueryer runs a query of one row: a *sql.DB, *sql.Conn or *sql.Tx.
type rowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// freePages returns the free leaf pages of the SQLite file that q reads (its committed state,
// its log included: sqlite_dbpage), sorted, and the page size. It checks the freelist's length
// against the header's count and fails on a mismatch. Nothing may commit to the file until the
// caller has used the list.
func freePages(ctx context.Context, q rowQueryer) ([]uint32, int, error) {
	page := func(n uint32) ([]byte, error) {
		var b []byte
		err := q.QueryRowContext(ctx, "SELECT data FROM sqlite_dbpage WHERE pgno = ?", n).Scan(&b)
		return b, err
	}
	first, err := page(1)
	if err != nil {
		return nil, 0, err
	}
	if len(first) < 100 {
		return nil, 0, fmt.Errorf("page 1 holds %d bytes", len(first))
	}
	size := len(first)
	trunk, count := binary.BigEndian.Uint32(first[32:]), binary.BigEndian.Uint32(first[36:])
	var leaves []uint32
	seen := uint32(0)
	for trunk != 0 {
		if seen++; seen > count {
			return nil, 0, fmt.Errorf("the freelist is longer than the header's %d pages", count)
		}
		b, err := page(trunk)
		if err != nil {
			return nil, 0, err
		}
		n := binary.BigEndian.Uint32(b[4:])
		if 8+4*int(n) > len(b) {
			return nil, 0, fmt.Errorf("freelist trunk page %d lists %d leaves", trunk, n)
		}
		for i := range n {
			leaves = append(leaves, binary.BigEndian.Uint32(b[8+4*i:]))
		}
		trunk = binary.BigEndian.Uint32(b[0:])
	}
	if seen+uint32(len(leaves)) != count {
		return nil, 0, fmt.Errorf("the freelist holds %d pages, the header says %d", seen+uint32(len(leaves)), count)
	}
	slices.Sort(leaves)
	return leaves, size, nil
}

// copyFileSparse copies the first limit bytes of the file from (all of it when limit is
// negative) to a new file to, leaving holes where the pages skip (1-based, sorted, of pageSize
// bytes) are; the copy has the length copied. Synced when sync is set.
func copyFileSparse(from, to string, limit int64, pageSize int, skip []uint32, sync bool) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, out.Close())
		if err != nil {
			_ = os.Remove(to)
		}
	}()
	size, ps := st.Size(), int64(pageSize)
	if limit >= 0 {
		size = min(size, limit)
	}
	copyRange := func(from, to int64) error { // bytes [from, to)
		if to <= from {
			return nil
		}
		if _, err := in.Seek(from, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(from, io.SeekStart); err != nil {
			return err
		}
		_, err := out.ReadFrom(&io.LimitedReader{R: in, N: to - from}) // copy_file_range on Linux
		return err
	}
	at := int64(0)
	for _, p := range skip {
		off := int64(p-1) * ps
		if off >= size {
			break
		}
		if err := copyRange(at, off); err != nil {
			return err
		}
		at = off + ps
	}
	if err := copyRange(at, size); err != nil {
		return err
	}
	if err := out.Truncate(size); err != nil {
		return err
	}
	if sync {
		return out.Sync()
	}
	return nil
}

// walLength returns how many bytes of the SQLite log at path hold its header and the frames of
// its current generation (those with the header's salts), and false when there is no log or
// it holds no header.
func walLength(path string) (int64, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	var hdr [32]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return 0, false, nil // empty or torn: nothing of it is replayed
	}
	if magic := binary.BigEndian.Uint32(hdr[0:]); magic&^1 != 0x377f0682 {
		return 0, false, nil
	}
	pageSize := int64(binary.BigEndian.Uint32(hdr[8:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	salts := hdr[16:24]
	frame := 24 + pageSize
	n := int64(32)
	var fh [24]byte
	for {
		if _, err := f.ReadAt(fh[:], n); err != nil {
			break
		}
		if string(fh[8:16]) != string(salts) {
			break
		}
		n += frame
	}
	st, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	return min(n, st.Size()), true, nil
}

// syncDir syncs the directory of path (a rename in it made durable).
func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
