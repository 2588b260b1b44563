package jepsen

import (
	"fmt"
	"io"
	"time"
)

// AsyncSummary is what an async run adds to its Summary.
type AsyncSummary struct {
	// Failovers are the failovers the nemesis made; Out the storage members left out of their
	// cluster at the end, and why.
	Failovers []FailoverRecord `json:"failovers"`
	Out       []string         `json:"out,omitempty"`
	// Cells and Durability are the workloads' results (nil when not run).
	Cells      *AsyncCellsResult      `json:"cells,omitempty"`
	Durability *AsyncDurabilityResult `json:"durability,omitempty"`
}

// print writes the async figures for people; unsafe is Config.UnsafeNoBufferedWrites.
func (a *AsyncSummary) print(w io.Writer, unsafe bool) {
	for _, f := range a.Failovers {
		fate := "rejoined as a minion"
		if !f.Rejoined {
			fate = "left out (below)"
		}
		if f.Error != "" {
			fmt.Fprintf(w, "  failover (%s) of c%d at %.1fs: promote failed (%s); old master %s restarted as master\n", f.Kind, f.Cluster,
				float64(f.Killed)/1e9, f.Error, f.OldMaster)
			continue
		}
		fmt.Fprintf(w, "  failover (%s) of c%d at %.1fs: %s -> %s in %.1fs (caught up %v); old master %s\n", f.Kind, f.Cluster,
			float64(f.Killed)/1e9, f.OldMaster, f.NewMaster, time.Duration(f.Promoted-f.Killed).Seconds(), f.CaughtUp, fate)
	}
	if c := a.Cells; c != nil {
		fmt.Fprintf(w, "  cells: %d cells written, %d acknowledged, %d puts buffered; lost %d, corrupted %d, unexpected %d, conflicting %d, phantom reads %d; buffered conflicts %d (allowed)\n",
			c.Keys, c.Acknowledged, c.Buffered, len(c.Lost), len(c.Corrupted), len(c.Unexpected), len(c.Conflicting), len(c.Phantom), len(c.BufferedConflicts))
		fmt.Fprintf(w, "  read-your-writes (strong reads; linearizability is not claimed in async mode): %d reads checked, %d violations, %d misses inside failover windows (expected)\n",
			c.RYW.Checked, len(c.RYW.Violations), len(c.RYW.Expected))
		s := c.Stale
		fmt.Fprintf(w, "  stale gets: %d, %d of a cell acknowledged before, %d missed it (%.1f%%); age of the cells missed p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
			s.Reads, s.Eligible, s.Missed, 100*s.MissedFraction, s.AgeP50Ms, s.AgeP99Ms, s.AgeMaxMs)
		if len(c.Diverged) > 0 {
			fmt.Fprintf(w, "  cells: %d diverged shards among the members replicating from their master\n", len(c.Diverged))
		}
	}
	if d := a.Durability; d != nil {
		fmt.Fprintf(w, "  durability: %d acknowledged (%d buffered), %d indeterminate (%d stored), %d failed; read from %v; lost %d cells (%d copies), unexpected %d, corrupted %d, duplicated %d, diverged shards %d; renumbered by a failover's replay %d (allowed)\n",
			d.Acknowledged, d.Buffered, d.Indeterminate, d.Recovered, d.Failed, d.Members, d.LostKeys, len(d.Lost), len(d.Unexpected),
			len(d.Corrupted), len(d.Duplicated), len(d.Diverged), d.RenumberedKeys)
	}
	for _, o := range a.Out {
		fmt.Fprintf(w, "  out of its cluster: %s\n", o)
	}
	if unsafe {
		lost := 0
		if a.Durability != nil {
			lost += a.Durability.LostKeys
		}
		if a.Cells != nil {
			lost += len(a.Cells.Lost)
		}
		if lost > 0 {
			fmt.Fprintf(w, "  unsafe mode: %d acknowledged writes lost, as expected without buffered writes\n", lost)
		} else {
			fmt.Fprintf(w, "  unsafe mode: no acknowledged write lost this time (without buffered writes a failover may lose some)\n")
		}
	}
}
