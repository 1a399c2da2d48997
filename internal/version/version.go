// Package version holds the module's version, for the client's telemetry
// (User-Agent azsdk-go-azsessions/<version>), the CLI's --version and the
// MCP server's serverInfo: one place to bump at a release.
package version

// Module is the version of github.com/azsessions/azsessions being built: the
// next release while it is unreleased (CHANGELOG.md's top section).
const Module = "v0.2.0"
