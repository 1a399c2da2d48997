package emulator_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testenv"
)

// TestSDKAgainstSandboxedEmulator: the real client against the emulator with
// real Python in bubblewrap, on one api-version of each generation: state
// across executions, file round trips (binary, 10 MiB, odd names),
// sub-directories, delete, and expiry.
func TestSDKAgainstSandboxedEmulator(t *testing.T) {
	t.Parallel()
	testenv.NeedSandbox(t, "IPython")
	exec := sharedExecutor(t, emulator.SandboxBwrap, "")
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: exec, Now: clock.Now, Cooldown: 5 * time.Minute})
	require.NoError(t, err)
	defer srv.Close()

	big := make([]byte, 10<<20)
	_, err = rand.Read(big)
	require.NoError(t, err)

	for _, version := range []string{azsessions.APIVersion20240202Preview, azsessions.APIVersion20251002Preview} {
		t.Run(version, func(t *testing.T) {
			client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{APIVersion: version}})
			require.NoError(t, err)
			ctx := context.Background()
			s := client.NewSession()
			legacy := version == azsessions.APIVersion20240202Preview

			// State persists between executions; a failure is data.
			_, err = s.Execute(ctx, "x = 6", nil)
			require.NoError(t, err)
			resp, err := s.Execute(ctx, "x * 7", nil)
			require.NoError(t, err)
			require.Equal(t, azsessions.ExecutionStatusSucceeded, resp.Status)
			require.Equal(t, "42", string(resp.Result))
			resp, err = s.Execute(ctx, "1/0", nil)
			require.NoError(t, err)
			require.Equal(t, azsessions.ExecutionStatusFailed, resp.Status)
			require.Contains(t, resp.Stderr, "ZeroDivisionError")

			// Files: binary 10 MiB and odd names, read back by the client and by Python.
			names := []string{"big.bin", "my file #1 100%.csv", "données_温度 ;&+.txt"}
			contents := [][]byte{big, []byte("a,b\n1,2\n"), []byte("héllo\x00\xff")}
			for i, name := range names {
				up, err := s.UploadFile(ctx, name, bytes.NewReader(contents[i]), nil)
				require.NoError(t, err, name)
				require.Equal(t, name, up.Name)
				require.Equal(t, int64(len(contents[i])), up.SizeInBytes)
				dl, err := s.DownloadFile(ctx, name, nil)
				require.NoError(t, err)
				got, err := io.ReadAll(dl.Body)
				dl.Body.Close()
				require.NoError(t, err)
				require.True(t, bytes.Equal(contents[i], got), name)
			}
			resp, err = s.Execute(ctx, "import os\nos.path.getsize('/mnt/data/big.bin')", nil)
			require.NoError(t, err)
			require.Equal(t, "10485760", string(resp.Result))
			resp, err = s.Execute(ctx, "open('/mnt/data/from-python.txt', 'w').write('written in the sandbox')", nil)
			require.NoError(t, err)
			require.Equal(t, azsessions.ExecutionStatusSucceeded, resp.Status, resp.Stderr)
			dl, err := s.DownloadFile(ctx, "from-python.txt", nil)
			require.NoError(t, err)
			got, _ := io.ReadAll(dl.Body)
			dl.Body.Close()
			require.Equal(t, "written in the sandbox", string(got))

			// Sub-directories (executions contract only).
			if legacy {
				_, err = s.UploadFile(ctx, "sub/x.txt", strings.NewReader("x"), nil)
				require.ErrorIs(t, err, azsessions.ErrUnsupported)
			} else {
				up, err := s.UploadFile(ctx, "/mnt/data/sub/dir/x.txt", strings.NewReader("nested"), nil)
				require.NoError(t, err)
				require.Equal(t, "/mnt/data/sub/dir/x.txt", up.FullPath())
				resp, err = s.Execute(ctx, "open('/mnt/data/sub/dir/x.txt').read()", nil)
				require.NoError(t, err)
				require.Equal(t, `"nested"`, string(resp.Result))
				page, err := s.NewListFilesPager(&azsessions.ListFilesOptions{Path: "sub/dir"}).NextPage(ctx)
				require.NoError(t, err)
				require.Len(t, page.Files, 1)
				require.Equal(t, "/mnt/data/sub/dir/x.txt", page.Files[0].FullPath())
			}

			// Delete.
			_, err = s.DeleteFile(ctx, names[1], nil)
			require.NoError(t, err)
			_, err = s.GetFile(ctx, names[1], nil)
			var re *azcore.ResponseError
			require.ErrorAs(t, err, &re)
			require.Equal(t, 404, re.StatusCode)

			// Expiry: after the cooldown the identifier names a fresh session.
			clock.Advance(6 * time.Minute)
			srv.Handler.Sweep()
			resp, err = s.Execute(ctx, "x", nil)
			require.NoError(t, err)
			require.Equal(t, azsessions.ExecutionStatusFailed, resp.Status)
			require.Contains(t, resp.Stderr, "NameError")
			page, err := s.NewListFilesPager(nil).NextPage(ctx)
			require.NoError(t, err)
			require.Empty(t, page.Files)
		})
	}
}

// TestSDKAgainstGvisorEmulator: the real client against the emulator with
// real Python in gVisor (SandboxGvisor): state across executions, a file
// round trip in both directions, and the sandbox's kernel is gVisor's.
func TestSDKAgainstGvisorEmulator(t *testing.T) {
	t.Parallel()
	testenv.NeedGvisor(t, "IPython")
	exec := sharedExecutor(t, emulator.SandboxGvisor, "")
	require.Equal(t, "gvisor", exec.Info().Sandbox)
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: exec})
	require.NoError(t, err)
	defer srv.Close()
	client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, nil)
	require.NoError(t, err)
	ctx := context.Background()
	s := client.NewSession()

	_, err = s.Execute(ctx, "x = 6", nil)
	require.NoError(t, err)
	resp, err := s.Execute(ctx, "x * 7", nil)
	require.NoError(t, err)
	require.Equal(t, azsessions.ExecutionStatusSucceeded, resp.Status, resp.Stderr)
	require.Equal(t, "42", string(resp.Result))

	data := make([]byte, 1<<20)
	_, err = rand.Read(data)
	require.NoError(t, err)
	_, err = s.UploadFile(ctx, "in.bin", bytes.NewReader(data), nil)
	require.NoError(t, err)
	resp, err = s.Execute(ctx, `import hashlib, os
d = open('/mnt/data/in.bin', 'rb').read()
open('/mnt/data/out.bin', 'wb').write(d[::-1])
print(os.uname().release, len(d))`, nil)
	require.NoError(t, err)
	require.Equal(t, azsessions.ExecutionStatusSucceeded, resp.Status, resp.Stderr)
	require.Contains(t, resp.Stdout, " 1048576")
	dl, err := s.DownloadFile(ctx, "out.bin", nil)
	require.NoError(t, err)
	got, err := io.ReadAll(dl.Body)
	dl.Body.Close()
	require.NoError(t, err)
	want := bytes.Clone(data)
	slices.Reverse(want)
	require.True(t, bytes.Equal(want, got), "the file written in gVisor differs")
}
