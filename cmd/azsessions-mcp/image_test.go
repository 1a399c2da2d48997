package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/tools"
)

// TestImageContent: an image result comes back as MCP image content (data
// and MIME type) after the text, and is saved with a local directory.
func TestImageContent(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nnot-really-a-png-but-bytes")
	figure, err := json.Marshal(map[string]string{"type": "image", "format": "png", "base64_data": base64.StdEncoding.EncodeToString(png)})
	require.NoError(t, err)
	srv := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: azsessionstest.Canned(map[string]emulator.ExecutionResult{
		"plt.show()": {Value: figure},
		"1+1":        {Value: json.RawMessage(`2`)},
	})}})
	tests := []struct {
		name      string
		code      string
		localDir  bool
		wantImage bool
	}{
		{"image", "plt.show()", false, true},
		{"image saved too", "plt.show()", true, true},
		{"no image", "1+1", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := serverConfig{}
			if tt.localDir {
				cfg.Tools.LocalDir = t.TempDir()
			}
			cs := connect(t, newServer(srv.Client(), cfg, discard()))
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tools.NameCodeInterpreter, Arguments: map[string]any{"python_code": tt.code}})
			require.NoError(t, err)
			require.False(t, res.IsError)
			text, ok := res.Content[0].(*mcp.TextContent)
			require.True(t, ok)
			if !tt.wantImage {
				require.Len(t, res.Content, 1)
				return
			}
			require.Len(t, res.Content, 2)
			img, ok := res.Content[1].(*mcp.ImageContent)
			require.True(t, ok, "%T", res.Content[1])
			require.Equal(t, "image/png", img.MIMEType)
			require.Equal(t, png, img.Data)
			require.Contains(t, text.Text, "the image is attached to this answer")
			require.NotContains(t, text.Text, base64.StdEncoding.EncodeToString(png), "never inlined in the text")
			if tt.localDir {
				require.Contains(t, text.Text, `"saved_to":"image-1.png"`)
				saved, err := os.ReadFile(filepath.Join(cfg.Tools.LocalDir, "image-1.png"))
				require.NoError(t, err)
				require.Equal(t, png, saved)
			}
		})
	}
}
