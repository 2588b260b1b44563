package partition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

// A successful probe closes a member's circuit breaker that is not closed, open or half-open,
// before the round publishes the member as master: a half-open breaker lets one request
// through and refuses the others, so a master that is back would refuse most requests (the
// writes of TestAsyncMasterDown after its master's restart, racing the reapers).
func TestProbeClosesBreaker(t *testing.T) {
	dsn := mariadbtest.DSN(t)
	c, err := OpenCluster(ClusterConfig{Name: "c0", Members: []string{dsn}, Prefix: "tp", ProbeInterval: time.Hour,
		BreakerFailures: 1, BreakerTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.waitProbed(ctx), "the first probe round") // the loop then sleeps for an hour
	require.True(t, c.HasMaster(), "the server is a master (writable, replicating from nobody)")
	m := c.members[0]
	for _, before := range []gobreaker.State{gobreaker.StateOpen, gobreaker.StateHalfOpen} {
		require.Error(t, m.run(func() error { return errors.New("connection refused") }))
		require.Equal(t, gobreaker.StateOpen, m.cb.Load().State(), "the breaker after a connection failure")
		if before == gobreaker.StateHalfOpen {
			require.Eventually(t, func() bool { return m.cb.Load().State() == gobreaker.StateHalfOpen }, 5*time.Second, 5*time.Millisecond,
				"the breaker half-open after its timeout")
		}
		c.probe()
		assert.Equal(t, gobreaker.StateClosed, m.cb.Load().State(), "the breaker after a successful probe, from %s", before)
		assert.True(t, c.HasMaster(), "the member is the master after the probe")
	}
}
