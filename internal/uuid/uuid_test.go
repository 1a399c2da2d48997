package uuid

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNew(t *testing.T) {
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		require.Regexp(t, v4, id)
		require.False(t, seen[id])
		seen[id] = true
	}
}
