// Package hclogslog adapts a *slog.Logger to hashicorp/go-hclog's Logger interface, so raft and
// other HashiCorp libraries log through the node's one structured logger.
package hclogslog
