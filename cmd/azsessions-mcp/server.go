package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/tools"
)

// serverConfig configures newServer.
type serverConfig struct {
	// SessionID, when set, is the session every connection uses; otherwise
	// each MCP connection gets a session with a fresh random identifier.
	SessionID string
	// Tools are the options of tools.New (LocalDir enables upload/download).
	Tools tools.Options
	// Version is reported to clients.
	Version string
}

// protocolVersions are the MCP protocol versions the server speaks: those
// with sessions (the 2026-07-28 protocol is sessionless, and a code
// interpreter keeps state per connection).
var protocolVersions = func() []string {
	var out []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < "2026-07-28" {
			out = append(out, v)
		}
	}
	return out
}()

// newServer returns an MCP server that serves the azsessions tools. Each MCP
// session (connection) gets its own code interpreter session, made on its
// first tool call, unless cfg.SessionID names one for all.
func newServer(client *azsessions.Client, cfg serverConfig, logger *slog.Logger) *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "azsessions-mcp", Title: "Azure Container Apps dynamic sessions code interpreter", Version: cfg.Version}, &mcp.ServerOptions{
		Logger:                    logger,
		SupportedProtocolVersions: protocolVersions,
		Instructions: "Tools to run Python code in a sandboxed, stateful session (code_interpreter) and to list its files in /mnt/data (list_files)" +
			uploadDownloadHint(cfg.Tools.LocalDir) + ".",
	})
	conns := &connections{client: client, cfg: cfg, log: logger, bySession: map[*mcp.ServerSession]*connTools{}}
	// The descriptions and schemas do not depend on the session.
	for _, t := range tools.New(client.Session("schema-only"), &cfg.Tools) {
		server.AddTool(&mcp.Tool{
			Name:        t.Name,
			Description: t.Description,
			InputSchema: t.Parameters,
			Annotations: annotations(t.Name),
		}, conns.handler(t.Name))
	}
	return server
}

func uploadDownloadHint(localDir string) string {
	if localDir == "" {
		return ""
	}
	return ", and to move files between the user's local directory and the session (upload_file, download_file)"
}

func annotations(name string) *mcp.ToolAnnotations {
	f, t := false, true
	switch name {
	case tools.NameListFiles:
		return &mcp.ToolAnnotations{Title: "List session files", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f}
	case tools.NameUploadFile:
		return &mcp.ToolAnnotations{Title: "Upload a local file to the session", DestructiveHint: &t, IdempotentHint: true, OpenWorldHint: &f}
	case tools.NameDownloadFile:
		return &mcp.ToolAnnotations{Title: "Download a session file", DestructiveHint: &f, OpenWorldHint: &f}
	}
	return &mcp.ToolAnnotations{Title: "Run Python code", DestructiveHint: &t, OpenWorldHint: &t}
}

// connections holds the tools of each MCP session.
type connections struct {
	client *azsessions.Client
	cfg    serverConfig
	log    *slog.Logger

	mu        sync.Mutex
	bySession map[*mcp.ServerSession]*connTools
}

// connTools are the tools of one MCP session and its session identifier
// (redacted from logs).
type connTools struct {
	tools      map[string]tools.Tool
	identifier string
}

// toolsFor returns the tools of the MCP session ss, making them (and the
// code interpreter session) on first use.
func (c *connections) toolsFor(ss *mcp.ServerSession) *connTools {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.bySession[ss]; ok {
		return m
	}
	var session *azsessions.Session
	if c.cfg.SessionID != "" {
		session = c.client.Session(c.cfg.SessionID)
	} else {
		session = c.client.NewSession()
	}
	m := &connTools{tools: map[string]tools.Tool{}, identifier: session.Identifier()}
	for _, t := range tools.New(session, &c.cfg.Tools) {
		m.tools[t.Name] = t
	}
	if ss == nil {
		return m // no connection to attach to (not expected)
	}
	c.bySession[ss] = m
	go func() {
		_ = ss.Wait()
		c.mu.Lock()
		delete(c.bySession, ss)
		c.mu.Unlock()
	}()
	return m
}

// sessions returns the number of MCP sessions with tools (for tests).
func (c *connections) sessions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bySession)
}

func (c *connections) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		conn := c.toolsFor(req.Session)
		t := conn.tools[name]
		args := ""
		if req.Params != nil {
			args = string(req.Params.Arguments)
		}
		var images []azsessions.Image
		ctx = tools.WithImageFunc(ctx, func(img azsessions.Image) { images = append(images, img) })
		out, err := t.Call(ctx, args)
		if err != nil {
			// the tool result says what failed and what to do; the log has
			// the cause, with the identifier and tokens redacted
			text := logFailure(ctx, c.log, name, err, conn.identifier)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		}
		content := []mcp.Content{&mcp.TextContent{Text: out}}
		for _, img := range images {
			content = append(content, &mcp.ImageContent{Data: img.Data, MIMEType: tools.ImageMediaType(img.Format)})
		}
		return &mcp.CallToolResult{Content: content}, nil
	}
}
