package cells

// Internals for the external tests (package cells_test), which use packages that import cells.

// CheckDirect is checkDirect: the direct transcoders against the decoding paths on one text.
var CheckDirect = checkDirect
