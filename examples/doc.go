// Package examples holds the example applications on the trips datastore that `schemaless dev`,
// `schemaless bench` and the tests share: the flights import and its read-back (ImportFlights,
// ReadBack, CountFlights), the billing and delay-compensation trigger groups, and the
// flights_by_origin index with its example queries. StartDemo and Demo.Import run them all on
// a cluster as `schemaless dev` does.
//
// # Triggers
//
// Two consumer groups read the BASE cells of trips (NewTriggers): "billing" writes a STATUS cell
// with the fare (BillingBody: 25 USD plus 0.11 USD a mile), "delay-compensation" a
// FARE_ADJUSTMENT cell with a credit for a flight more than 60 minutes late (CompensationBody).
// Their handlers are idempotent: the cell each writes is a deterministic function of the BASE
// cell (same row key, same ref key, a body computed from the BASE body only, no clock), so a
// redelivered BASE cell writes the identical cell again and the datastore answers "exists".
// CheckTriggerCells reads the written cells back and compares them with the rules.
//
// # Index
//
// IndexDefinition is the flights sharded on their origin airport, a deliberately skewed shard
// field (a few hubs hold most flights), with the fields the example queries (Examples) filter and
// sort on; ReportIndex runs them and checks each against a brute-force scan of the flights.
//
// Everything here talks to a cluster through package client only.
package examples
