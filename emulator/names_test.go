package emulator_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

//lint:file-ignore SA1019 the deprecated names are what is tested.

// requestRecorder is an Executor whose kernels run like ScriptedExecutor's
// and record the last ExecutionRequest they were handed.
type requestRecorder struct {
	emulator.Executor
	mu   sync.Mutex
	last emulator.ExecutionRequest
}

func (r *requestRecorder) NewKernel(ctx context.Context) (emulator.Kernel, error) {
	k, err := r.Executor.NewKernel(ctx)
	return recordingKernel{k, r}, err
}

func (r *requestRecorder) request() emulator.ExecutionRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

type recordingKernel struct {
	emulator.Kernel
	r *requestRecorder
}

func (k recordingKernel) Execute(ctx context.Context, req emulator.ExecutionRequest) (emulator.ExecutionResult, error) {
	k.r.mu.Lock()
	k.r.last = req
	k.r.mu.Unlock()
	return k.Kernel.Execute(ctx, req)
}

// TestOutputStreamsMaxLengthNames: Options.OutputStreamsMaxLength and its
// deprecated former name OutputMaxLength both set the output cap; both set to
// the same value is fine, to different values an error of NewHandler. The
// kernel is handed the cap under both of ExecutionRequest's names, so an
// Executor written against either reads it.
func TestOutputStreamsMaxLengthNames(t *testing.T) {
	tests := []struct {
		name      string
		newName   int
		oldName   int
		wantCap   int
		wantError string
	}{
		{"neither", 0, 0, emulator.DefaultOutputStreamsMaxLength, ""},
		{"new name", 7, 0, 7, ""},
		{"old name", 0, 7, 7, ""},
		{"both equal", 7, 7, 7, ""},
		{"both different", 7, 9, 0, "Options.OutputStreamsMaxLength (7) and its deprecated name Options.OutputMaxLength (9) differ"},
		{"old name over the maximum", 0, emulator.MaxOutputStreamsMaxLength + 1, 0, "over 1048576 characters"},
		{"new name negative", -1, 0, 0, "negative limit"},
		{"old name negative", 0, -1, 0, "negative limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScript()
			rec := &requestRecorder{Executor: emulator.ScriptedExecutor(s.run)}
			opt := emulator.Options{Executor: rec, OutputStreamsMaxLength: tt.newName, OutputMaxLength: tt.oldName}
			if tt.wantError != "" {
				_, err := emulator.NewHandler(opt)
				require.ErrorContains(t, err, tt.wantError)
				require.NoError(t, rec.Close())
				return
			}
			e := newEnv(t, opt)
			out := e.stdout(wire.V20251002Preview, "sess-names", "print:"+strings.Repeat("a", 5000))
			require.Len(t, out, tt.wantCap)
			req := rec.request()
			require.Equal(t, tt.wantCap, req.OutputStreamsMaxLength)
			require.Equal(t, tt.wantCap, req.OutputMaxLength, "the deprecated name carries the same cap")
		})
	}
	// The deprecated constants keep their values.
	require.Equal(t, emulator.DefaultOutputStreamsMaxLength, emulator.DefaultOutputMaxLength)
	require.Equal(t, emulator.MaxOutputStreamsMaxLength, emulator.MaxOutputMaxLength)
	require.Equal(t, 4096, emulator.DefaultOutputStreamsMaxLength)
}
