// Package pebblelog sends what cockroachdb/pebble logs to a log/slog logger: the one adapter of
// the node's pebble databases (the shared raft log, package raftlog, and the embedded cell
// store, package storage).
package pebblelog
