package mariadbtest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
)

// Where FreePorts looks.
const (
	// minTestPort is the lowest port FreePorts picks: below it are well-known services.
	minTestPort = 10000
	// portRangeFile holds the kernel's ephemeral port range ("32768\t60999").
	portRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"
)

// FreePorts returns the first of n consecutive ports of 127.0.0.1 that nobody listens on (TCP
// and UDP) now, for a test that gives servers fixed ports (a topology, a replicated set kept
// across restarts). It picks them outside the kernel's ephemeral port range: a port in that
// range, free when checked, can be taken by any process's outgoing connection before the
// server binds it. It fails t when it finds no such range.
func FreePorts(t testing.TB, n int) int {
	t.Helper()
	lo, hi := ephemeralRange()
	var spans [][2]int // candidate bases, [first, last]
	if lo-n > minTestPort {
		spans = append(spans, [2]int{minTestPort, lo - n})
	}
	if hi+1 < 65536-n {
		spans = append(spans, [2]int{hi + 1, 65535 - n})
	}
	if len(spans) == 0 {
		t.Fatalf("mariadbtest: no room for %d ports outside the ephemeral range %d-%d", n, lo, hi)
	}
	for range 100 {
		sp := spans[rand.N(len(spans))]
		base := sp[0] + rand.N(sp[1]-sp[0]+1)
		if portsFree(base, n) {
			return base
		}
	}
	t.Fatalf("mariadbtest: no %d consecutive free ports outside the ephemeral range %d-%d", n, lo, hi)
	return 0
}

// ephemeralRange returns the kernel's ephemeral port range, or Linux's default when it cannot
// be read.
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	data, err := os.ReadFile(portRangeFile)
	if err != nil {
		return lo, hi
	}
	var l, h int
	if _, err := fmt.Sscan(string(data), &l, &h); err != nil || l < 1 || h < l || h > 65535 {
		return lo, hi
	}
	return l, h
}

// portsFree reports whether TCP and UDP ports base..base+n-1 of 127.0.0.1 can be bound now.
func portsFree(base, n int) bool {
	for p := base; p < base+n; p++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		l.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		u.Close()
	}
	return true
}
