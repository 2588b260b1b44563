// Package jsontext writes JSON text without reflection, byte for byte as encoding/json writes
// the same values with HTML escaping off (json.Encoder.SetEscapeHTML(false), the API's
// writer): the hot responses of the HTTP API (a cell, a write's outcome) and the bodies that
// package cells turns from MessagePack into JSON. Tests compare every function with
// encoding/json on random input.
package jsontext
