package api

// adminRoutes registers the cluster administration endpoints (/v1/admin/...): membership,
// voters, leadership, placement.
func (s *Server) adminRoutes() {}
