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
// Errors are {"error":{"code","message","traceId"}} with the code repeated
// in the x-ms-error-code header. Neither error messages nor logs ever contain
// a session identifier, a bearer token or a query string.
package emulator
