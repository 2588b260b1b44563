package main

import "github.com/spf13/cobra"

// newAdminBackupCmds returns the backup and restore commands.
func newAdminBackupCmds() []*cobra.Command { return nil }
