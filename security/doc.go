// Package security holds what a node needs to refuse strangers: certificates (a development
// certificate authority and the node and client certificates it signs), TLS configurations
// that reload their PEM files without a restart (the client API, the admin listener, and mutual
// TLS between nodes), the principals file (hashed bearer tokens and client certificate names
// with their roles, optionally scoped per datastore), the HTTP middleware that answers 401 and
// 403, and the gossip keyring. LoadNode loads a node's files at once (schemaless serve);
// AddPrincipal and WriteGossipKeyFile write them (schemaless certs).
//
// # Identities
//
// Every certificate this package issues is an ECDSA P-256 certificate signed by the cluster's CA.
// A node certificate carries the URI SAN schemaless://node/<id> and the node's hosts (IP and DNS
// SANs); it serves the client API, the admin listener and the node port, and it is the client
// certificate a node presents to its peers. A client certificate carries schemaless://client/<name>
// and the name as its CommonName; the principals file gives that name its roles. A node accepts
// raft and node RPC only over TLS from a peer whose certificate its CA signed and that carries a
// node URI (a client certificate of the same CA is refused there), and verifies the peer it dials
// the same way and by the host it dialed.
//
// # Roles
//
// Roles are read, write (implies read), admin (implies every role), metrics (GET /metrics) and
// replicator (implies write; put_cells with an origin, a peer cluster's replicator).
// A principal's datastores, when listed, scope its read and write roles; admin is cluster-wide.
//
// # Reload
//
// Certs and Authenticator re-read their files when Reload is called or, with Watch, when a
// file's contents change. A file that fails to parse is logged and the
// previous contents stay in force, so a half-written file never locks the cluster out.
//
// # Caveats
//
// Bearer tokens are stored as SHA-256 digests: tokens are 256-bit random strings (NewToken), for
// which a fast digest is as strong as a slow one; a human-chosen password must not be used as a
// token. Revoking a client certificate means removing its name from the principals file (there
// is no CRL or OCSP); rotating the CA means trusting a bundle holding the old and the new CA
// while certificates are replaced.
package security
