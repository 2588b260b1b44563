package cells

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStatusString(t *testing.T) {
	t.Parallel()
	for s, want := range map[Status]string{
		StatusCreated: "created", StatusExists: "exists", StatusConflict: "conflict", StatusBuffered: "buffered",
		0: "status(0)", 9: "status(9)",
	} {
		assert.Equal(t, want, s.String(), "Status(%d).String()", uint8(s))
	}
}
