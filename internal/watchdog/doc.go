// Package watchdog ends a test that runs far past its usual time, with every goroutine's
// stack, instead of leaving it to the go test binary's -timeout.
//
// `make test` runs every package with one -timeout of 45 minutes: a test that hangs in one
// package holds the whole run that long, and the stacks that go test prints then come after
// everything else has been torn down by the packages' own timeouts, if at all. A SIGQUIT sent
// from outside may land while a goroutine runs code whose frames the runtime cannot unwind
// (race-detector builds), and print nothing of use. Start arms a timer for one test: when it
// fires, the stacks of all goroutines of the test binary go to standard error
// (runtime/pprof's "goroutine" profile at debug level 2, the format of an unrecovered panic),
// then a summary of at most 25 lines that groups the goroutines by where they wait in this
// project's code (Summary: a CI log often keeps only its tail, and a stuck cluster has
// thousands of goroutines), and the binary panics, so that the package fails at once and says
// where it was stuck.
package watchdog
