package api_test

import (
	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/cluster"
)

// A node serves every route group (package node gives it as each part of api.Backends).
var (
	_ api.NodeBackend    = (*cluster.Node)(nil)
	_ api.CellReader     = (*cluster.Node)(nil)
	_ api.CellWriter     = (*cluster.Node)(nil)
	_ api.LogReader      = (*cluster.Node)(nil)
	_ api.GroupBackend   = (*cluster.Node)(nil)
	_ api.IndexBackend   = (*cluster.Node)(nil)
	_ api.SchemaBackend  = (*cluster.Node)(nil)
	_ api.AdminBackend   = (*cluster.Node)(nil)
	_ api.BackupBackend  = (*cluster.Node)(nil)
	_ api.CatalogBackend = (*cluster.Node)(nil)
	_ api.LeaderHinter   = (*cluster.Node)(nil)
)
