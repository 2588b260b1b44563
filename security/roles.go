package security

import (
	"context"
	"fmt"
	"slices"
)

// Role is what a principal may do. See the package documentation for what each role covers.
type Role string

// The roles.
const (
	// RoleNone marks a request that needs no credentials (health probes).
	RoleNone Role = ""
	// RoleRead reads cells, logs, indexes, schemas and consumer groups, and commits offsets.
	RoleRead Role = "read"
	// RoleWrite writes and erases cells and runs transactions; it implies RoleRead.
	RoleWrite Role = "write"
	// RoleAdmin runs the admin routes (membership, backup and restore, index and schema
	// definitions), the console and pprof; it implies every other role on every datastore.
	RoleAdmin Role = "admin"
	// RoleMetrics reads GET /metrics.
	RoleMetrics Role = "metrics"
	// RoleReplicator is a peer cluster's replicator: it writes cells with an origin (put_cells
	// with "origin", replication between clusters) and implies RoleWrite.
	RoleReplicator Role = "replicator"
)

// ParseRole returns the role named s, or an error naming it.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleRead, RoleWrite, RoleAdmin, RoleMetrics, RoleReplicator:
		return r, nil
	}
	return "", fmt.Errorf("security: unknown role %q (want read, write, admin, metrics or replicator)", s)
}

// Principal is an authenticated caller. It is immutable once built.
type Principal struct {
	// Name identifies the principal in the audit log and in 429s' per-principal limit; for a
	// client certificate, its CommonName.
	Name string
	// Roles the principal holds.
	Roles []Role
	// Datastores, when not empty, are the only datastores its read and write roles apply to.
	Datastores []string
	// Method is how it authenticated: "token" or "certificate".
	Method string
}

// Allows reports whether p may act in role on datastore ds ("" for a request about no
// datastore). RoleNone is allowed to everyone, nil included.
func (p *Principal) Allows(role Role, ds string) bool {
	if role == RoleNone {
		return true
	}
	if p == nil {
		return false
	}
	if slices.Contains(p.Roles, RoleAdmin) {
		return true
	}
	switch role {
	case RoleAdmin:
		return false
	case RoleMetrics:
		return slices.Contains(p.Roles, RoleMetrics)
	}
	if ds != "" && len(p.Datastores) > 0 && !slices.Contains(p.Datastores, ds) {
		return false
	}
	repl := slices.Contains(p.Roles, RoleReplicator)
	switch role {
	case RoleRead:
		return slices.Contains(p.Roles, RoleRead) || slices.Contains(p.Roles, RoleWrite) || repl
	case RoleWrite:
		return slices.Contains(p.Roles, RoleWrite) || repl
	}
	return slices.Contains(p.Roles, role)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p (see PrincipalFrom).
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, nil if none (authentication off, or a route
// that needs none).
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
