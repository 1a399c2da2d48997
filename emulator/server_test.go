package emulator_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
)

func TestStart(t *testing.T) {
	ran := 0
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: emulator.ScriptedExecutor(func(ctx context.Context, code string) emulator.ExecutionResult {
		ran++
		return emulator.ExecutionResult{Stdout: code}
	})})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(srv.Endpoint, "http://127.0.0.1:"))
	require.True(t, strings.HasSuffix(srv.Endpoint, srv.Handler.PoolPath()))

	client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, nil)
	require.NoError(t, err)
	resp, err := client.NewSession().Execute(context.Background(), "hello", nil)
	require.NoError(t, err)
	require.Equal(t, "hello", resp.Stdout)
	require.Equal(t, 1, ran)

	require.NoError(t, srv.Close())
	_, err = http.Get(srv.Endpoint + "/metadata?api-version=2025-10-02-preview")
	require.Error(t, err, "no longer serving")
}

func TestStartBadAddress(t *testing.T) {
	closed := false
	_, err := emulator.Start("256.0.0.1:bad", emulator.Options{Executor: closeRecorder{&closed}})
	require.Error(t, err)
	require.True(t, closed, "the executor is closed on error")
}

type closeRecorder struct{ closed *bool }

func (c closeRecorder) NewKernel(context.Context) (emulator.Kernel, error) { return nil, nil }
func (c closeRecorder) Info() emulator.Info                                { return emulator.Info{} }
func (c closeRecorder) Close() error                                       { *c.closed = true; return nil }
