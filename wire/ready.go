package wire

// Readiness answers GET /readyz with 200. Without a datastore parameter the node is ready
// (every partition it serves knows its leader), and Datastores reports each datastore's own
// readiness: a datastore can be unready on a ready node (an async storage cluster without a
// master). With ?datastore=NAME, Datastore names it and it is ready; Datastores is absent.
type Readiness struct {
	Status     string                        `json:"status"` // "ready"
	Node       string                        `json:"node"`
	Datastore  string                        `json:"datastore,omitempty"`
	Datastores map[string]DatastoreReadiness `json:"datastores,omitempty"`
}

// DatastoreReadiness is one datastore's readiness on a node: Ready, or Error saying why not
// ("trips/0 has no leader", "trips: storage cluster c0 has no master", one reason per line).
type DatastoreReadiness struct {
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
}

// NotReady answers GET /readyz with 503: the error envelope of ErrorBody (code unavailable,
// the reasons in the message) and, without a datastore parameter, each datastore's readiness.
type NotReady struct {
	Error      ErrorDetail                   `json:"error"`
	Datastores map[string]DatastoreReadiness `json:"datastores,omitempty"`
}
