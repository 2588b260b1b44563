package cluster

import "net/http"

// backupRPCRoutes registers the node-to-node endpoints of backup and restore.
func (n *Node) backupRPCRoutes(mux *http.ServeMux) {}
