package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes b to path through path+".tmp": the temporary file is written and fsynced, then
// renamed over path, then the directory is fsynced so that the rename survives a crash. It
// blocks on that I/O. Errors are the file system's; on one, path is unchanged (a ".tmp" file
// may stay behind, overwritten by the next call).
func Write(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
