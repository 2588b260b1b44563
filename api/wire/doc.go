// Package wire holds the JSON shapes of the HTTP API: requests, answers, the error body and its
// codes. The server (package api) and the Go client (package client) both use it, so the client
// does not depend on the server.
package wire
