package jepsen

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// LinResult is the outcome of a linearizability check.
type LinResult struct {
	// Result is "yes", "no", or "unknown" (the search ran out of time).
	Result string `json:"result"`
	// Operations is the number of operations checked (ok operations and indeterminate writes).
	Operations int `json:"operations"`
	// Registers is the number of independent (row key, column key) registers.
	Registers int `json:"registers"`
	// Seconds is how long the search took.
	Seconds float64 `json:"seconds"`
	// Visualization is the path of porcupine's HTML page ("" if none was written).
	Visualization string `json:"visualization,omitempty"`
}

// CheckLinearizable checks the cells operations of ops against CellsModel within
// env.CheckTimeout (0: no limit), and writes porcupine's visualization, with the run's fault
// windows as annotations, to env.Dir/linearizability.html when env.Dir is set.
func CheckLinearizable(ops []Op, env *CheckEnv) LinResult {
	end := historyEnd(ops, env.End)
	return checkModel(CellsModel, CellOperations(ops, end), env, end, "linearizability.html")
}

// historyEnd is a time after every operation of ops and at least end: the return time of the
// operations whose outcome is unknown.
func historyEnd(ops []Op, end int64) int64 {
	for _, o := range ops {
		end = max(end, o.Complete+1)
	}
	return end
}

// checkModel checks pops against model, whose operations carry an opMeta, within
// env.CheckTimeout (0: no limit), and writes porcupine's visualization with the fault windows
// to env.Dir/file when env.Dir is set.
func checkModel(model porcupine.Model, pops []porcupine.Operation, env *CheckEnv, end int64, file string) LinResult {
	regs := map[string]bool{}
	for _, o := range pops {
		regs[o.Metadata.(opMeta).register] = true
	}
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, pops, env.CheckTimeout)
	out := LinResult{Operations: len(pops), Registers: len(regs), Seconds: time.Since(start).Seconds()}
	switch res {
	case porcupine.Ok:
		out.Result = "yes"
	case porcupine.Illegal:
		out.Result = "no"
	default:
		out.Result = "unknown"
	}
	if env.Dir != "" {
		info.AddAnnotations(FaultAnnotations(env.Faults, end))
		path := filepath.Join(env.Dir, file)
		if err := writeVisualization(model, path, info); err == nil {
			out.Visualization = path
		}
	}
	return out
}

func writeVisualization(model porcupine.Model, path string, info porcupine.LinearizationInfo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := porcupine.Visualize(model, info, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// FaultAnnotations turns fault windows into porcupine annotations on a "nemesis" row of the
// visualization (a fault still in force at the end runs until end).
func FaultAnnotations(faults []Fault, end int64) []porcupine.Annotation {
	out := make([]porcupine.Annotation, 0, len(faults))
	for _, f := range faults {
		e := f.End
		if e == 0 {
			e = end
		}
		out = append(out, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           f.Start,
			End:             e,
			Description:     fmt.Sprintf("%s %v", f.Kind, f.Nodes),
			Details:         f.Detail,
			BackgroundColor: "#f6c6c6",
		})
	}
	return out
}
