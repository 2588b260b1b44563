package delayproxy

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echo starts a TCP echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// TestDelay: a round trip through the proxy takes twice its delay (once each way), bytes
// arrive intact and in order, and a large transfer is not slowed to one chunk per delay.
func TestDelay(t *testing.T) {
	const delay = 40 * time.Millisecond
	p, err := Start("127.0.0.1:0", echo(t), delay)
	require.NoError(t, err)
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()

	for i := 0; i < 3; i++ {
		start := time.Now()
		_, err = c.Write([]byte("ping"))
		require.NoError(t, err)
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
		rtt := time.Since(start)
		assert.Equal(t, "ping", string(buf))
		assert.GreaterOrEqual(t, rtt, 2*delay, "round trip %d", i)
		assert.Less(t, rtt, 2*delay+300*time.Millisecond, "round trip %d", i)
	}

	data := make([]byte, 4<<20)
	_, err = rand.Read(data)
	require.NoError(t, err)
	start := time.Now()
	go func() { _, _ = c.Write(data) }()
	got := make([]byte, len(data))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	took := time.Since(start)
	assert.True(t, bytes.Equal(data, got), "4 MiB through the proxy and back, in order")
	// 4 MiB is 128 reads of 32 KiB each way: one delay per read would take over 10 s.
	assert.Less(t, took, 3*time.Second, "a large transfer is pipelined, not one chunk per delay")
	t.Logf("4 MiB round trip through a %v proxy: %v", delay, took)
}

// TestClose: Close ends the connections through the proxy.
func TestClose(t *testing.T) {
	p, err := Start("127.0.0.1:0", echo(t), time.Millisecond)
	require.NoError(t, err)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("x"))
	require.NoError(t, err)
	buf := make([]byte, 1)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(buf)
	assert.Error(t, err, "a connection after Close")
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "closed, not left open")
}
