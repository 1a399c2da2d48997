package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCustomContainerAgainstEmulator runs the example against the embedded
// emulator: each session's container kept its own notes, the pool's views
// name the sessions, and a stopped session's next request found a fresh
// container.
func TestCustomContainerAgainstEmulator(t *testing.T) {
	testenv.NeedSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	rep, err := run(ctx, "", &out, &logs)
	require.NoError(t, err, "output:\n%s\nlogs:\n%s", out.String(), logs.String())
	require.Contains(t, rep.Backend, "local emulator")
	require.Equal(t, []note{{ID: 1, Text: "alice's first note"}}, rep.Notes["alice"])
	require.Equal(t, []note{{ID: 1, Text: "bob's first note"}}, rep.Notes["bob"])
	require.True(t, rep.Session.ExpiresAt.After(rep.Session.CreatedAt), "%+v", rep.Session)
	require.NotEmpty(t, rep.Session.ETag)
	require.Equal(t, 2, rep.Listed)
	require.ElementsMatch(t, []string{"alice", "bob"}, rep.ListedOurs)
	require.Equal(t, "Session <identifier> in session pool emulator stopped.", rep.StopMessage)
	require.Empty(t, rep.AfterStop)
	require.Contains(t, out.String(), "All steps succeeded.")
}
