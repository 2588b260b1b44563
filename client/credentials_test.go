package client_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
)

// TestCredentialsApply: the zero value sets nothing, a token file wins over a token and is
// trimmed, an unreadable token file names --token-file, and a CA file that does not load fails.
func TestCredentialsApply(t *testing.T) {
	t.Parallel()
	cfg := client.DefaultConfig()
	require.NoError(t, client.Credentials{}.Apply(&cfg))
	assert.Empty(t, cfg.Token)
	assert.Nil(t, cfg.TLS)

	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(file, []byte("  slt_abc\n"), 0o600))
	require.NoError(t, client.Credentials{Token: "other", TokenFile: file}.Apply(&cfg))
	assert.Equal(t, "slt_abc", cfg.Token, "the file's token, trimmed")

	err := client.Credentials{TokenFile: filepath.Join(dir, "missing")}.Apply(&cfg)
	assert.ErrorContains(t, err, "--token-file")
	assert.Error(t, client.Credentials{CACert: filepath.Join(dir, "missing.crt")}.Apply(&cfg), "a CA file that does not load")
}
