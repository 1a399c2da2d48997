package emulator

import "github.com/azsessions/azsessions/internal/sandbox"

func newSandboxExecutor(opts SandboxOptions) (Executor, error) {
	ex, err := sandbox.New(opts)
	if err != nil {
		return nil, err
	}
	return ex, nil
}
