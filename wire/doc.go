// Package wire holds the JSON shapes of the HTTP API: requests, answers, the error body and its
// codes, for the cell, log, group, index, cluster, admin and backup routes. The server (package
// api) and the Go client (package client) both use it, so the client does not depend on the
// server; it imports nothing of the project.
package wire
