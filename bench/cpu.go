package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMeter reads the CPU time (user + system) of this process and of the processes listed by
// --cpu-pid (Config.CPUPIDs: node processes of an external target, a database server), so
// that a run can report the CPU it cost in all. Its readings are cumulative since each
// process started; a run reports the difference between its first and last reading.
type cpuMeter struct{ pids []int }

// clockTicks is the unit of /proc/PID/stat's utime and stime: USER_HZ, 100 on Linux.
const clockTicks = 100

// read returns the CPU seconds used so far by this process and the meter's other processes,
// and (others) those of the other processes alone. A process that cannot be read (gone, or no
// /proc) counts 0 and its error is returned beside the sums.
func (m cpuMeter) read() (sum, others float64, err error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, fmt.Errorf("getrusage: %w", err)
	}
	var firstErr error
	for _, pid := range m.pids {
		s, err := procCPUSeconds(pid)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		others += s
	}
	return time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds() + others, others, firstErr
}

// procCPUSeconds returns utime + stime of process pid, from /proc/PID/stat (fields 14 and
// 15, after the command name in parentheses, which may hold spaces).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("--cpu-pid %d: %w", pid, err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("--cpu-pid %d: unexpected /proc stat %q", pid, s)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("--cpu-pid %d: unexpected /proc stat %q", pid, s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("--cpu-pid %d: unexpected /proc stat %q", pid, s)
	}
	return float64(ut+st) / clockTicks, nil
}

// cpuSpan measures the CPU of one measured phase: start it with begin, end it with end.
type cpuSpan struct {
	m                 cpuMeter
	start, startOther float64
	err               error
}

// begin takes the phase's first reading.
func (c *cpuSpan) begin() { c.start, c.startOther, c.err = c.m.read() }

// end returns the CPU seconds since begin of all the meter's processes and of the --cpu-pid
// processes alone (both 0 when a reading failed).
func (c *cpuSpan) end() (all, others float64) {
	now, nowOther, err := c.m.read()
	if err != nil || c.err != nil {
		return 0, 0
	}
	return now - c.start, nowOther - c.startOther
}
