package azsessions_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
)

// FuzzIdentifierThroughFake: any identifier the client accepts for an
// api-version reaches the fake (the emulator, which validates it with the
// service's rule) byte-identical: the execution is counted under exactly
// that identifier, the new contract echoes it, Session.Get returns it, and
// a file uploaded in the session is read back from the same session.
func FuzzIdentifierThroughFake(f *testing.F) {
	for _, s := range []string{
		"abcd", "testSessionIdentifier", "ABCXYZabcxyz0189_|{}[]:\";'<>?/.,@#$%^&*()-+=!~`",
		"a/b?c=d&identifier=e#f", "%41%2F%zz", "+++=", "a;b;c", "....", "////", "%00%", "&&&&", "====",
		"x", "a b", "données", "emoji-😀-id", "../../etc", "a\\b", "sp ace", "tab\tid",
		"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
	} {
		for v := range len(relEveryVersion) {
			f.Add(s, uint8(v))
		}
	}
	const cooldown = time.Minute
	srv := azsessionstest.Start(f, withCells(&azsessionstest.Options{Options: emulator.Options{Cooldown: cooldown}}))
	clients := make([]*azsessions.Client, len(relEveryVersion))
	for i, version := range relEveryVersion {
		o := &azsessions.ClientOptions{}
		o.APIVersion = version
		o.Retry.MaxRetries = -1
		c, err := srv.NewClient(o)
		if err != nil {
			f.Fatal(err)
		}
		clients[i] = c
	}
	f.Fuzz(func(t *testing.T, id string, v uint8) {
		version := relEveryVersion[int(v)%len(relEveryVersion)]
		sess := clients[int(v)%len(clients)].Session(id)
		ctx := context.Background()
		before := srv.ExecutionsFor(id)
		resp, err := sess.Execute(ctx, "6 * 7", nil)
		if errors.Is(err, azsessions.ErrInvalidIdentifier) {
			return
		}
		if err != nil {
			t.Fatalf("%s: Execute with %q: %v", version, id, err)
		}
		defer srv.Advance(cooldown + time.Second) // end the session: the pool stays small
		if got := srv.ExecutionsFor(id) - before; got != 1 {
			t.Fatalf("%s: the fake counted %d executions under %q", version, got, id)
		}
		if !relIsLegacy(version) && resp.Identifier != id {
			t.Fatalf("%s: the answer names %q, want %q", version, resp.Identifier, id)
		}
		content := []byte("content of " + id)
		if _, err := sess.UploadFile(ctx, "f.txt", bytes.NewReader(content), nil); err != nil {
			t.Fatalf("%s: UploadFile with %q: %v", version, id, err)
		}
		dl, err := sess.DownloadFile(ctx, "f.txt", nil)
		if err != nil {
			t.Fatalf("%s: DownloadFile with %q: %v", version, id, err)
		}
		got, err := io.ReadAll(dl.Body)
		dl.Body.Close()
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%s: read back %q (%v), want %q", version, got, err, content)
		}
		if version == azsessions.APIVersion20250202Preview || version == azsessions.APIVersion20251002Preview {
			p, err := sess.Get(ctx, nil)
			if err != nil {
				t.Fatalf("%s: Get with %q: %v", version, id, err)
			}
			if p.Identifier != id {
				t.Fatalf("%s: Get names %q, want %q", version, p.Identifier, id)
			}
		}
	})
}
