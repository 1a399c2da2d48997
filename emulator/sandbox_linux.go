package emulator

import "github.com/azsessions/azsessions/internal/sandbox"

// The sandbox buffers each stream up to its own cap and the handler refuses
// larger requests: the two 1 Mi-character caps must be the same number. This
// fails to compile when they differ (a negative index or one past the end).
var _ = [1]struct{}{}[sandbox.MaxOutputStreamsMaxLength-MaxOutputStreamsMaxLength]

func newSandboxExecutor(opts SandboxOptions) (Executor, error) {
	ex, err := sandbox.New(opts)
	if err != nil {
		return nil, err
	}
	return ex, nil
}
