package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWrite: a file is written, then replaced whole, and no temporary file stays; a directory
// that does not exist is an error that leaves nothing behind.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	require.NoError(t, Write(path, []byte("first, longer content")))
	require.NoError(t, Write(path, []byte("second")))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "second", string(b))
	_, err = os.Stat(path + ".tmp")
	assert.ErrorIs(t, err, os.ErrNotExist, "the temporary file is renamed away")
	assert.Error(t, Write(filepath.Join(dir, "missing", "x"), []byte("x")))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only state.json")
}
