package api

// consoleRoutes registers the operator console (/console).
func (s *Server) consoleRoutes() {}
