// Package plot draws line charts (SVG or PNG) of the JSON lines of `schemaless bench --json`:
// the engine of `schemaless bench plot`.
//
// Each result read gives a point of its series (one series per target, workload, client,
// consistency, and rate or --y metric when there are several); points of a series at one x are
// averaged.
// Config names the files, the axes and the output; Run draws it.
package plot
