// Package layers holds the test that keeps the module's package graph in the layer order that
// docs/design.md ("Layers") states: a package imports only packages on a lower line of that
// table, and every package of the module is on exactly one line.
package layers
