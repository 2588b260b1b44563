package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

// workloadTrips is the Mezzanine flow on the real flights (see benchTripsWorkload).
const workloadTrips = "trips"

// tripsFlags are the flags of the trips workload.
type tripsFlags struct{}

func (t *tripsFlags) register(fl *pflag.FlagSet) {}

func (t *tripsFlags) validate(f benchFlags) error { return nil }

// benchTripsWorkload runs the trips workload on env.
func benchTripsWorkload(ctx context.Context, target string, env benchEnv, f benchFlags) ([]benchResult, error) {
	return nil, errors.New("trips: not implemented")
}
