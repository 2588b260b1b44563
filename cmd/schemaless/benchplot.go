package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newBenchPlotCmd is `schemaless bench plot`.
func newBenchPlotCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plot",
		Short: "Plot results of schemaless bench --json",
		RunE:  func(*cobra.Command, []string) error { return errors.New("not implemented") },
	}
}
