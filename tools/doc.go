// Package tools turns an azsessions.Session into agent tools that any
// function-calling framework can use: a name, a description, the JSON Schema
// of the arguments object and a Call function that takes the JSON arguments
// the model sent and returns the text to hand back to the model.
//
// New returns, in this order:
//
//	code_interpreter  {"python_code": string}                              run Python in the session
//	list_files        {}                                                   list /mnt/data
//	upload_file       {"local_file_path": string, "remote_file_name"?: string}   only with Options.LocalDir
//	download_file     {"remote_file_path": string, "local_file_path"?: string}   only with Options.LocalDir
//
// Each tool is one row of one table (table.go): its name, description and
// arguments as a Go struct, from which both its JSON Schema (Parameters) and
// the decoding of the model's arguments are derived, so the two cannot
// drift. The MCP server and the adapters only translate Tool.
//
// The tool names and the parameter names of code_interpreter and list_files
// are those of LlamaIndex's AzureCodeInterpreterToolSpec, so prompts written
// for it keep working.
//
// # What the model sees
//
// code_interpreter answers a JSON object whose first key is "status"
// (Succeeded or Failed), then "stdout", "stderr", "result" (the JSON value of
// the last expression: "" when there is none, null for None) and
// "executionTimeInMilliseconds", and, when there is something to add, "note".
// A program that raised an exception or has a syntax error is a normal answer
// with status Failed and the traceback in stderr: the model reads it and fixes
// its code. When stdout or stderr reached the service's output cap the note
// says the output was truncated and suggests writing large output to a file
// under /mnt/data and downloading it.
//
// An image result (a matplotlib figure as the cell's last value) is never
// inlined as base64: "result" becomes {"type":"image","format":"png",
// "size_in_bytes":N} plus "saved_to" (a name relative to Options.LocalDir such
// as "image-1.png", never overwriting a file) when LocalDir is set. The
// program gets the bytes from Options.OnImage; an adapter that attaches the
// image to the answer gets them from WithImageFunc.
//
// list_files answers a JSON array of {"filename", "size_in_bytes",
// "file_full_path"} objects ("is_directory": true marks directories), over
// every page.
//
// # Arguments the model got wrong
//
// Arguments that are not a JSON object, miss a required field or give a field
// the wrong type, a local path outside Options.LocalDir, a local file that
// does not exist, a remote file that does not exist and similar mistakes of
// the model are answered as the tool's output, {"error":"..."}, with a nil Go
// error, so that the model can read the message and try again. Unknown fields
// are ignored.
//
// # Go errors
//
// Call returns a non-nil error only when the service could not be used: the
// transport failed, the service answered 401/403, 429 or 5xx, the context
// ended, or the client is misconfigured. The error is an *Error whose Error()
// text is short and safe to show to the model: it never contains the session
// identifier (which azcore errors carry in the request URL) nor a token, for
// example "the code interpreter service answered 403 (AuthorizationFailed)"
// or "could not reach the code interpreter service". The cause stays
// available through errors.As / errors.Unwrap for the program's own logs
// (note that the cause may contain the identifier).
//
// # Local files
//
// With Options.LocalDir set, upload_file reads and download_file writes files
// inside that directory only: relative paths are resolved against it,
// absolute paths must point into it, paths with ".." segments are refused, and
// symbolic links that lead out of it are refused (files are opened through an
// os.Root). download_file never overwrites: when the local name is taken it
// saves under the first free name "name-1.ext", "name-2.ext", ... and says so
// in its answer; the file appears only once completely downloaded
// (azsessions.Session.DownloadFileToPath).
//
// # Input sanitising
//
// Models often wrap code in Markdown fences. Unless Options.DisableSanitize is
// set, code_interpreter passes python_code through SanitizeInput first, which
// removes surrounding whitespace, a surrounding ``` / ```python / ```py fence
// and a language tag line ("python" or "py") and nothing else.
//
// # Adapting to frameworks
//
// Ready-made adapters, each its own module so that this one pulls in no
// framework, translate the tools for agent SDKs:
//
//	github.com/azsessions/azsessions/adapters/openai       openai-go v3 (Chat Completions and Responses)
//	github.com/azsessions/azsessions/adapters/anthropic    anthropic-sdk-go v2 (tool_result blocks, image blocks)
//	github.com/azsessions/azsessions/adapters/langchaingo  langchaingo tools.Tool
//
// They use WithImageFunc to attach a call's image to its answer and
// Tool.StrictParameters for strict schemas. Other frameworks need a few lines
// (see "Adapting to a framework" in the repository's README for the MCP
// go-sdk and eino). The MCP server in cmd/azsessions-mcp and the agent in
// examples/agent use this package.
package tools
