package cluster

import "net/http"

// adminRPCRoutes registers the node-to-node endpoints of the admin operations.
func (n *Node) adminRPCRoutes(mux *http.ServeMux) {}
