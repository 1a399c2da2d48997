package azsessions

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/wire"
)

// TestConstantsMatchWire: the public constants are spelled out (so that go doc
// shows their values) and must agree with the wire package the emulator uses.
func TestConstantsMatchWire(t *testing.T) {
	for _, tt := range []struct{ public, wire any }{
		{APIVersion20240202Preview, wire.V20240202Preview},
		{APIVersion20240802Preview, wire.V20240802Preview},
		{APIVersion20241002Preview, wire.V20241002Preview},
		{APIVersion20250202Preview, wire.V20250202Preview},
		{APIVersion20251002Preview, wire.V20251002Preview},
		{DefaultAPIVersion, wire.DefaultVersion},
		{int64(MaxUploadBytes), int64(wire.MaxUploadBytes)},
		{DataDir, wire.DataDir},
		{string(ExecutionStatusNotStarted), wire.StatusNotStarted},
		{string(ExecutionStatusRunning), wire.StatusRunning},
		{string(ExecutionStatusSucceeded), wire.StatusSucceeded},
		{string(ExecutionStatusFailed), wire.StatusFailed},
		{string(ExecutionStatusCanceled), wire.StatusCanceled},
		{DefaultExecutionTimeout, time.Duration(wire.MaxExecutionSeconds) * time.Second},
		{DefaultOutputStreamsMaxLength, wire.DefaultOutputStreamsMaxLength},
	} {
		require.Equal(t, tt.wire, tt.public)
	}
}
