package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

// workloadScaleCells measures latency at a fixed rate as the stored cells grow.
const workloadScaleCells = "scale-cells"

// scaleFlags are the flags of the scale-cells workload.
type scaleFlags struct{}

func (s *scaleFlags) register(fl *pflag.FlagSet) {}

func (s *scaleFlags) validate(f benchFlags) error { return nil }

// benchScaleCellsWorkload runs the scale-cells workload on env.
func benchScaleCellsWorkload(ctx context.Context, target string, env benchEnv, f benchFlags) ([]benchResult, error) {
	return nil, errors.New("scale-cells: not implemented")
}
