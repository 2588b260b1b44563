package api

// backupRoutes registers the backup and restore endpoints.
func (s *Server) backupRoutes() {}
