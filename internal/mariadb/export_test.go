package mariadb

// TmpDir returns the server's private tmpdir, for tests.
func (i *Instance) TmpDir() string { return i.tmpDir }
