// Package schemas is the pure model of column schemas: it compiles a JSON Schema (draft
// 2020-12) given as text, gives its canonical text, and checks cell bodies against it,
// answering the first violation with the JSON pointer of the failing field. It does no I/O:
// the schema's text is all it reads (a reference to anything outside it is refused), so every
// replica that compiles the same text checks bodies alike.
//
// Validation is github.com/santhosh-tekuri/jsonschema/v6; this package adds what a replicated
// state machine needs of it: a canonical text to compare registrations by, no loader (no file
// or network access), draft 2020-12 always, and a violation chosen deterministically among all
// the validator reports (the validator walks objects in Go's random map order).
//
// # Caveats
//
// The "format" keyword is an annotation, not an assertion (the draft 2020-12 default): "format":
// "date-time" does not reject "yesterday". Every replica must run the same build of this
// package, as it must of the rest of the state machine: another version of the validator could
// judge a body differently, or word a message differently.
package schemas
