package mariadb

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCloseProblems(t *testing.T) {
	t.Parallel()
	inst := &Instance{dataDir: "/data/c0-m1"}
	err := errors.Join(
		&MemberError{Cluster: 0, Member: 1, Instance: inst, Err: errors.New("killed after 60s\nlog tail")},
		&MemberError{Cluster: 1, Member: 0, Instance: inst, Err: fmt.Errorf("stop: %w", ErrExited)},
		errors.New("mariadb: remove /tmp/x: busy"),
	)
	assert.Equal(t, []string{"mariadb c0-m1: killed after 60s (see /data/c0-m1/error.log)", "mariadb: remove /tmp/x: busy"}, CloseProblems(err))
	assert.Empty(t, CloseProblems(nil), "a clean Close")
	assert.Equal(t, []string{"mariadb: other"}, CloseProblems(errors.New("mariadb: other")), "an error that is no join")
}
