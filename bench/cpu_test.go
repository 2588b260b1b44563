package bench

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// burn spins until this process has used secs more CPU seconds (getrusage).
func burn(t *testing.T, secs float64) {
	start, _, err := cpuMeter{}.read()
	require.NoError(t, err, "getrusage")
	for x := 0; ; x++ {
		if x%100000 == 0 {
			now, _, err := cpuMeter{}.read()
			require.NoError(t, err, "getrusage")
			if now-start >= secs {
				return
			}
		}
	}
}

// A span counts the CPU this process and the --cpu-pid processes spend: this process given as
// its own --cpu-pid counts twice, and once as the --cpu-pid processes' part.
func TestCPUSpan(t *testing.T) {
	self := cpuSpan{m: cpuMeter{}}
	twice := cpuSpan{m: cpuMeter{pids: []int{os.Getpid()}}}
	self.begin()
	twice.begin()
	burn(t, 0.3)
	s, none := self.end()
	tw, other := twice.end()
	assert.GreaterOrEqual(t, s, 0.3, "CPU seconds of this process")
	assert.Zero(t, none, "no --cpu-pid: no part of theirs")
	assert.InDelta(t, s, other, 0.05, "the --cpu-pid part: this process once")
	// /proc counts in clock ticks of 10 ms.
	assert.InDelta(t, 2*s, tw, 0.05, "CPU seconds with this process also given as --cpu-pid (%.3f alone)", s)
}

// A --cpu-pid that names no process is an error naming the flag, and the span reports 0.
func TestCPUPIDGone(t *testing.T) {
	_, err := procCPUSeconds(1 << 30)
	require.Error(t, err, "a pid that does not exist")
	assert.Contains(t, err.Error(), "--cpu-pid", "the error names the flag")
	s := cpuSpan{m: cpuMeter{pids: []int{1 << 30}}}
	s.begin()
	all, others := s.end()
	assert.Zero(t, all, "a span with an unreadable process")
	assert.Zero(t, others, "a span with an unreadable process: the --cpu-pid part")
}
