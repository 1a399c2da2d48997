// Package emulator is a local emulator of the Azure Container Apps dynamic
// sessions pool management API (the built-in Python code interpreter).
//
// One http.Handler serves every api-version of the data plane
// (2024-02-02-preview and 2024-08-02-preview with the legacy,
// properties-wrapped contract; 2024-10-02-preview, 2025-02-02-preview and
// 2025-10-02-preview with the executions contract) under the pool path
// /subscriptions/{id}/resourceGroups/{rg}/sessionPools/{name}. The
// azsessions-emulator command, the azsessionstest fake and the tests all use
// this one handler.
//
// Code runs in an Executor: NewSandboxExecutor gives real Python in a
// bubblewrap sandbox, ScriptedExecutor answers from a Go function.
//
// Routes (relative to Handler.PoolPath, each with ?api-version=..; the
// session-scoped ones with &identifier=..):
//
//	legacy (2024-02-02-preview, 2024-08-02-preview):
//	  POST   code/execute            execute (also code/execute/)
//	  POST   files/upload            upload (multipart part "file"; the filename may be a path)
//	  GET    files                   listFiles (every file, recursively)
//	  GET    files/content/{name}    download ({name} may contain "/")
//	  GET    files/{name}            getFile (a list with one item)
//	  DELETE files/{name}            deleteFile (200 {"message":...})
//	new (2024-10-02-preview and later):
//	  POST   executions              execute (sync; Asynchronous answers 202 at once)
//	  GET    executions/{id}         getExecution
//	  POST   files                   upload (multipart part "file", optional path=)
//	  GET    files                   listFiles (path=, recursive= on 2025-10-02-preview)
//	  GET    files/{name}            getFile
//	  GET    files/{name}/content    download
//	  DELETE files/{name}            deleteFile (204)
//	2025-02-02-preview and later:
//	  GET    session                 getSession
//	  DELETE session                 deleteSession (204)
//	  GET    listSessions            listSessions (no identifier; skip=)
//	  GET    metadata                metadata (no identifier)
//	2025-10-02-preview:
//	  POST   .management/stopSession stopSession (text/plain 200)
//
// Files: every file operation stays inside the session's data directory
// (os.Root; symlinks are followed only while they stay inside). On the read
// routes (get, download, list, delete) a path that is missing, is not a
// regular file or directory (a FIFO, a device), or leads out of the data
// directory is 404 FileNotFound "file not found", the same answer in every
// case, so that code in a session cannot probe the host's paths; ".." and
// absolute paths outside /mnt/data are 400. Files are opened with O_NONBLOCK
// and checked after the open, so nothing swapped in can block a request.
// Upload names and paths must be UTF-8 without control characters (400);
// listings leave out names that are not UTF-8 or contain control characters
// (code can create them; JSON cannot name them faithfully). On
// 2025-10-02-preview the directory field of uploads, GET files/{name} and
// listings is relative to the request's path parameter ("" for a file
// directly in it).
//
// Limits: outputStreamsMaxLength (2025-10-02-preview) may be at most
// MaxOutputMaxLength (1 Mi characters); a larger value is refused with 400
// SessionRequestValidationFailed, never clamped. Each session runs one
// execution at a time and queues at most Options.MaxQueuedExecutions more
// (default 32); beyond that 429 TooManyRequests with Retry-After: 1. An
// execution body is at most 16 MiB, an upload Options.MaxUploadBytes; a body
// that sends nothing for Options.BodyReadTimeout (default 1 min) fails with
// 400. timeoutInSeconds and outputStreamsMaxLength are int32: a value out of
// range is a 400 that names the field. When the kernel reports a disk limit
// of its data directory (kernel.SpaceReporter, as the sandbox does), an
// upload that would pass it is 413 DataDirFull and leaves nothing behind. A
// file listing collects at most Options.MaxListEntries entries (default
// 10,000), 256 directory levels below its directory and 16 MiB of paths;
// beyond that it is 400 FileListTooLarge (never a silently cut list), and it
// stops when its client goes away or its session ends. A new session is 404
// NoSessionsAvailable when the pool holds MaxSessions sessions, and also
// when the Executor has no room for one more sandbox (its NewKernel error
// wraps ErrPoolFull: the sandbox executor's pool-wide memory and disk
// budgets, after ending expired sessions); existing sessions keep working.
//
// Executions: the operation-id header names an execution within its session
// (a fresh one is made up when it is missing). The client sends the same
// operation-id again only with the same code, to retry: the recorded
// execution answers without running the code again. The same operation-id
// with other code is 409 OperationIdConflict (the record keeps a SHA-256 of
// the code, not the code). A session records its last 1,000 executions, and
// at most Options.MaxRecordedBytes (default 32 MiB) of their results: beyond
// that the oldest finished records are forgotten (GET executions/{id} is then
// 404 ExecutionNotFound), while running executions and the most recently
// finished one are always kept.
//
// Errors are {"error":{"code","message","traceId"}} with the code repeated
// in the x-ms-error-code header. Neither error messages nor logs ever contain
// a session identifier, a bearer token or a query string.
package emulator
