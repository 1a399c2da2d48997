// Package emulator is a local emulator of the Azure Container Apps dynamic
// sessions pool management API: the built-in Python code interpreter, the
// JavaScript code interpreter (NodeLTS), Shell pools and custom-container
// pools.
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
//	  POST   .management/stopSession stopSession (text/plain 200)
//
// # Custom containers
//
// With Options.PoolType CustomContainer (-pool-type CustomContainer) the
// pool is a custom-container pool, as Learn's sessions-custom-container.md
// (ms.date 2026-03-18) and sessions-usage.md describe it. The first request
// naming an identifier starts a session: a sandbox (same backends, limits,
// cooldown and expiry as the other kinds) in which Options.ContainerCommand
// runs (/bin/sh -c, working directory /mnt/data, after Options.ContainerDir
// is copied there), and the request waits until the command accepts
// connections on Options.TargetPort inside the sandbox (the cold start,
// bounded by Options.ContainerStartTimeout). The sandbox keeps its own
// network: the emulator reaches the port through a Unix socket the
// sandbox's forwarder dials (see internal/sandbox/container.go). Routes,
// relative to Handler.PoolPath:
//
//	any method, any path outside .management/, ?identifier=..   forwarded to
//	    http://127.0.0.1:{TargetPort}{path}?{query} (no api-version needed)
//	2025-02-02-preview and later (api-version required):
//	  POST .management/stopSession?identifier=..  stopSession (text/plain 200
//	       "Session {id} in session pool {pool} stopped.")
//	  POST .management/getSession?identifier=..   getSession: SessionView
//	       {identifier, etag, expiresAt, createdAt, lastAccessedAt}
//	  POST .management/listSessions?skip=N        listSessions: {value, count,
//	       nextLink} (count of this page, nextLink null on the last page)
//
// GET/DELETE session, listSessions, metadata and executions are not served
// by a custom-container pool: like any other path they go to the container
// (as microsoft/azure-container-apps issue #1665 reports of the service).
// The request and answer bodies stream both ways, in full duplex (an
// answer may start while the request body still arrives); WebSocket
// upgrades pass through. Requests of one session may run concurrently; the
// session is held (it cannot expire) until each answer has been sent, and
// its idle time counts from the end of the last one.
//
// Sessions are created by the first request naming a new identifier (the
// service's documentation: there is no create call). Here every route with
// an identifier creates one except GET executions/{id}, GET and DELETE
// session and stopSession, which answer an unknown identifier with
// SessionWithIdentifierNotFound. A session ended by DELETE session,
// stopSession or expiry is gone with its kernel state and files: a later
// request with the same identifier creates a new, empty session, as a new
// identifier would. Which routes create a session is the emulator's guess
// (no public source lists them); no logic of the client depends on it.
//
// Files: every file operation stays inside the session's data directory
// (os.Root; symlinks are followed only while they stay inside). On the read
// routes (get, download, list, delete) a path that is missing, is not a
// regular file or directory (a FIFO, a device), or leads out of the data
// directory is 404 FileNotFound "file not found", the same answer in every
// case, so that code in a session cannot probe the host's paths; ".." and
// absolute paths outside /mnt/data are 400. Files are opened with O_NONBLOCK
// and checked after the open, so nothing swapped in can block a request (a
// file that session code holds a write lease on, fcntl F_SETLEASE, is 404 at
// once instead of blocking the download for lease-break-time, 45 s).
// Upload names and paths must be UTF-8 without control characters (400);
// listings leave out names that are not UTF-8 or contain control characters
// (code can create them; JSON cannot name them faithfully). On
// 2025-10-02-preview the directory field of uploads, GET files/{name} and
// listings is relative to the request's path parameter ("" for a file
// directly in it).
//
// Limits: outputStreamsMaxLength (2025-10-02-preview) may be at most
// MaxOutputStreamsMaxLength (1 Mi characters); a larger value is refused with 400
// SessionRequestValidationFailed, never clamped. Each session runs one
// execution at a time, in the order the requests were accepted (an
// asynchronous execution accepted before a synchronous one runs first; the
// emulator's guess: the service's queue order is not documented), and
// queues at most Options.MaxQueuedExecutions more (default 32); beyond that
// 429 TooManyRequests with Retry-After: 1. An
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
// Pool-wide budgets (the emulator's choice; the service sizes its pools by
// maxConcurrentSessions and says nothing of memory): a sandbox's
// MemoryLimitBytes and MaxDataDirBytes are caps, not reservations. As root
// the sandboxes' cgroups sit under one parent whose memory limit is
// SandboxOptions.MaxTotalMemoryBytes (and whose pids limit is half of the
// host's tasks), so the kernel caps what they use together: past it
// sandboxes are killed one at a time until the rest fit, never the
// emulator (on cgroup v1 idle ready sandboxes first, then the session whose
// cgroup holds the most memory, which may be an idle session and not the
// one allocating; on cgroup v2 the largest process by resident set). A
// killed session's running execution fails with a note, and its next one
// restarts the kernel with a note saying why.
// Their data directories together are held to MaxTotalDiskBytes by the
// watcher (a session whose directory grows while the pool is over it is
// stopped, and uploads get only the room left). A new session is admitted
// while the memory the sandboxes use (their working set), the tasks and the
// disk leave room for one more; so 20, 50 or 100 new identifiers at once
// all get a sandbox with the defaults, where counting each sandbox at its
// 1 GiB limits let 11 in on a 23 GiB host. Without cgroups (not root) no
// kernel limit holds the sum, so each sandbox still counts its
// MemoryLimitBytes (SandboxOptions, Capacity).
//
// Executions: the operation-id header names an execution within its session
// (a fresh one is made up when it is missing). The client sends the same
// operation-id again only with the same code, to retry: the recorded
// execution answers without running the code again. The same operation-id
// with other code is 409 OperationIdConflict (the record keeps a SHA-256 of
// the code, not the code). A session records at most
// Options.MaxRecordedBytes (default 32 MiB) of results: beyond that the
// results of the oldest finished records are forgotten, while running
// executions and the most recently finished one are always kept. All live
// sessions together record at most Options.MaxTotalRecordedBytes (default
// 512 MiB, so that 600 sessions cannot hold 600 × 32 MiB): when a finished
// execution brings the pool over it, the results of the oldest finished
// records of the session recording the most bytes are forgotten first,
// until the pool is within the bound. Running executions and the execution
// that has just finished are never forgotten; another session's most recent
// record may be. That bound is the emulator's own guess-free choice of
// bounding its memory: the service documents none.
//
// Forgetting a result keeps the fact that the code ran: a tombstone (the
// operation-id, the code's SHA-256, the final status, when it finished and
// when its result was forgotten; no output), counted as 256 bytes in both
// bounds and never dropped for bytes. A retry with a tombstone's
// operation-id and the same code is 409 ExecutionResultForgotten and does
// not run the code again (the result cannot be answered any more); with
// other code 409 OperationIdConflict. GET executions/{id} of a tombstone is
// 404 ExecutionNotFound, as for an unknown id, with a message saying that
// the execution ran and its result was forgotten: the azsessions client
// then reports an unknown outcome (ErrExecutionOutcomeUnknown) after a
// lost answer, and while its poller follows the execution (the 404 inside),
// or, asked to run the code with that OperationID, sends the POST and
// returns the 409 inside an ErrExecutionOutcomeUnknown error (not a plain
// 4xx refusal: the code ran); never a success, and the code does not run
// again. A session remembers at most its last 1,000 executions, records
// and tombstones together: beyond that its oldest tombstone is dropped
// (with none left, its oldest finished record whole),
// and that is the only way an operation-id of a live session becomes
// unknown again, so that a retry of it would run the code again. Since
// tombstones are not dropped for bytes, the records can pass the bounds by
// the tombstones (at most 1,000 × 256 bytes a session). An ended session's
// records and tombstones go with it and no longer count; a new session of
// the same identifier knows none of them.
//
// Errors are {"error":{"code","message","traceId"}} with the code repeated
// in the x-ms-error-code header. Neither error messages nor logs ever contain
// a session identifier, a bearer token or a query string.
//
// # Error codes
//
// The codes the service is known to send (the spec's examples and live
// reports, api.md §12) are used where they fit:
//
//	code                            status  when
//	SessionRequestValidationFailed  400     a bad identifier, body, field or parameter
//	SessionPropertiesMissing        400     the legacy body without its properties wrapper,
//	                                        or the wrapper on 2025-10-02-preview
//	SessionWithIdentifierNotFound   400     an operation on an existing session (get, delete,
//	                                        stop) names one that does not exist
//
// Every other code is emulator-specific: no public source shows the code the
// service sends in that case (for some, such as the full pool's 404 or the
// upload limit's 413, the status is documented and only the code is a guess).
// No logic of the azsessions client depends on them: it decides on the HTTP
// status, and where it reads a code it accepts the service's documented ones
// or a family of names (Execution.TimedOut also looks at the execution time;
// a 404 of GET executions/{id} counts as "no such execution" only for a
// not-found code naming an execution or operation, or the in-container
// proxy's text, and is otherwise treated as ambiguous, never as proof).
// One code only makes it more careful: ExecutionResultForgotten turns a
// 409, which the client otherwise reads as "nothing ran", into an unknown
// outcome (the code did run); a service that never sends it loses nothing.
//
//	emulator-specific code   status  when
//	NoSessionsAvailable      404     a new session when the pool is full (MaxSessions, or
//	                                 the executor's pool-wide memory and disk budgets)
//	RouteNotFound            404     no such path or method, or a route the api-version lacks
//	ExecutionNotFound        404     GET executions/{id} of an unknown id, or of an execution
//	                                 whose result was forgotten (the message says so)
//	FileNotFound             404     no such file or directory
//	InvalidApiVersion        400     a missing or unknown api-version
//	FileListTooLarge         400     a listing over its bounds (directory depth, bytes of paths)
//	Unauthorized             401     RequireToken is set and no bearer token came (with
//	                                 Options.Token: not that token)
//	OperationIdConflict      409     an operation-id reused with other code
//	ExecutionResultForgotten 409     a retry (same operation-id, same code) of an execution
//	                                 that ran and whose result was forgotten: not run again
//	PayloadTooLarge          413     an upload over Options.MaxUploadBytes (128 MiB)
//	DataDirFull              413     an upload that would pass the data directory's disk limit
//	TooManyRequests          429     the session's execution queue, or the pool's execution
//	                                 body memory, is full (with Retry-After: 1)
//	ContainerStartFailed     502/504 a custom container's command exited before it listened
//	                                 (502) or did not listen in time (504)
//	ContainerUnreachable     502     a request could not be forwarded to a custom container
//	                                 (its command exited: the session ends)
//	InternalServerError      500     the executor failed to start or run a kernel; also the
//	                                 error.code of an execution whose kernel failed
//	ServiceUnavailable       503     the handler is closed
//	Timeout                  -       error.code of an execution that passed its timeout
//	                                 (the in-container proxy's documentation names an
//	                                 execution error "Timeout")
//
// # What no public source confirms: the emulator's guesses
//
// The emulator follows the spec (the swaggers and their examples, replayed
// by the conformance test), Learn's session docs, live reports and what
// Microsoft's and third-party clients send and read (testdata/peers, replayed
// by TestPeerClientCaptures). Where none of them says what the service does,
// the behaviour below is the emulator's guess; clients should not depend on
// it.
//
//	behaviour                          what the emulator does (the emulator's guess)
//	a value that is not a number,      its text/plain form from IPython's display formatter
//	  bool or string                   (IPython.lib.pretty: a long list breaks over lines), as
//	                                   the service's Jupyter kernel would render it; AutoGen
//	                                   parses that form, which supports the guess
//	float('inf'), float('-inf')        null, as the spec example answers for float('nan');
//	                                   "inf" / "-inf" with returnJupyterFormatExecutionResult
//	returnJupyterFormatExecutionResult every value but None (null) as its text/plain string (the
//	  for other than primitives        swagger names primitives only); "" for no value
//	several display outputs in a cell  display() prints each object's text/plain to stdout (as a
//	                                   terminal IPython does); of several figures the last is
//	                                   the cell's image; a DataFrame's value is its text/plain
//	                                   form (no text/html); executionResult stays one value
//	an image on the executions         {"type":"image","format":"png","base64_data":...}, the
//	  contract                         legacy contract's shape (seen by clients), in both modes
//	a figure over 8 MiB of PNG         not returned: no image value, a note on stderr (the
//	                                   service's bound is not documented; a default figure
//	                                   takes tens of KiB)
//	a Python exception                 status Failed (legacy Failure, result null), the
//	                                   traceback in stderr, no error object
//	a timeout                          status Failed with error {"code":"Timeout"}; stderr holds
//	                                   the cell's traceback (as an interrupt in Jupyter, without
//	                                   any emulator frame) and a line "TimeoutError: the
//	                                   execution timed out after N seconds"; variables are kept.
//	                                   Code that ignores the interrupt is killed after a grace
//	                                   period and the kernel restarted (variables lost, files
//	                                   kept), which stderr says
//	the unit of the output cap         characters, cut once by the kernel (never half a
//	  (outputStreamsMaxLength)         character). The spec names the field a length with
//	                                   "default 4096" and no unit; the one live measurement
//	                                   (LangChain's, on a Shell pool: "exactly 4096 bytes")
//	                                   does not show what happens to non-ASCII output, where
//	                                   bytes and characters differ. The client's
//	                                   Execution.Truncated and the tools count characters too
//	an asynchronous execution          answers Running at once (as the spec's _Async_Running
//	                                   examples), never NotStarted; GET executions/{id} polls it
//	Retry-After on a running           1 (second), on the execute answer and on each look-up
//	  execution                        while Running, so azcore's poller polls every second
//	execution records                  the last 1,000 of a session (records and tombstones), at
//	                                   most MaxRecordedBytes of results; a forgotten result
//	                                   leaves a tombstone (ExecutionNotFound on GET); older ids
//	                                   are unknown
//	execution records of the pool      at most MaxTotalRecordedBytes (512 MiB) in all live
//	                                   sessions together, the largest session's oldest
//	                                   forgotten first (a tombstone stays): the emulator's
//	                                   guess-free choice of bounding its own memory (the
//	                                   service documents no such bound)
//	the same operation-id again        with the same code: the recorded execution, not run
//	                                   again, or 409 ExecutionResultForgotten when its result
//	                                   was forgotten; with other code: 409 OperationIdConflict
//	a full queue or body memory        429 TooManyRequests with Retry-After: 1 (no 429 of the
//	                                   service is documented)
//	a file listing's nextLink          a continuationToken parameter of the emulator's own;
//	                                   at most MaxListEntries entries a page
//	listSessions paging                skip and an absolute nextLink, 300 a page (the page
//	                                   size is documented for custom-container pools only)
//	the path parameter of files        relative to /mnt/data, a leading /mnt/data and "/" (the
//	                                   2025-02-02-preview upload example) naming /mnt/data
//	a session's etag                   a random GUID per kernel
//	a Python pool given Shell fields   400 SessionRequestValidationFailed
//	2024-10-02-preview synchronous     200, as the regenerated swagger and most examples (the
//	  execute                          older swagger, one example and the JS client say 202)
//	custom containers: what reaches    the request as sent, query included (identifier and any
//	  the container                    api-version are not removed; Learn shows only the path
//	                                   being forwarded), less Authorization (the caller's token
//	                                   is for the pool) and the hop-by-hop headers; Host is
//	                                   127.0.0.1:{TargetPort}; no X-Forwarded-* headers
//	custom containers: the container's stdout, stderr, exit status and working directory
//	  command's environment            /mnt/data as for Shell pools; no PORT or other variable
//	                                   added; the sandbox's own loopback as its only network
//	custom containers: a command that  502 ContainerStartFailed (exited first) or 504
//	  does not start                   ContainerStartFailed (did not listen within
//	                                   ContainerStartTimeout), with its stderr (first 4,096
//	                                   characters); no session is left
//	custom containers: a command that  the session ends; the request that finds it gone is
//	  exits later                      502 ContainerUnreachable, the next request with the
//	                                   identifier cold-starts a new session (the service's
//	                                   probes and restart policy are not emulated)
//	custom containers: stopSession     the session's requests still in flight end with it
//	  during a request                 (the container is stopped at once): one waiting for
//	                                   its answer is 502 ContainerUnreachable, an upgraded
//	                                   connection is closed
//	custom containers: the answer's    at most 1 MiB (as the emulator's request headers); a
//	  headers                          container's larger ones are 502 ContainerUnreachable
//	custom containers: a missing       400 SessionRequestValidationFailed, as on every route
//	  identifier
//	custom containers: .management     POST only, api-version 2025-02-02-preview or later
//	  routes                           (Learn shows 2025-02-02-preview); other .management
//	                                   paths 404 RouteNotFound; listSessions' nextLink keeps
//	                                   the api-version (Learn's example shows only skip)
//
// NodeLTS pools (PoolTypeNodeLTS: JavaScript in one Node.js process per
// session). Learn's JavaScript tutorial shows one exchange (a legacy
// execute of console.log: stdout "hello-world\n", executionResult "", the
// legacy answer naming the value executionResult, with no $id), which the
// emulator matches; the spec's metadata example is a Node pool whose
// jupyterKernel is IJavascript (n-riesco/ijavascript, whose kernel nel runs
// code with vm.runInThisContext). The rest is the emulator's guess:
//
//	behaviour                          what the emulator does (the emulator's guess)
//	how a cell runs                    in the process's global context (vm.runInThisContext, as
//	                                   nel does): var, let, const, function and class
//	                                   declarations stay for the next executions; require
//	                                   resolves from /mnt/data
//	the value                          numbers, booleans and strings as JSON (NaN and infinities
//	                                   null), undefined "" (the tutorial's console.log), null as
//	                                   Python's None ("", null in Jupyter format), anything else
//	                                   its util.inspect form (nel's text/plain); a Promise value
//	                                   is awaited and its result is the value (as nel does)
//	returnJupyterFormatExecution-      the util.inspect form ("'nan'" for the string "nan")
//	  Result
//	a top-level await                  allowed: the cell is rewritten as Node.js's REPL does
//	                                   (its declarations hoisted, so they stay)
//	an uncaught error                  status Failed, the stack in stderr without the emulator's
//	                                   frames, no error object; an error thrown later by a timer
//	                                   or promise a cell left running goes to stderr and does not
//	                                   end the session
//	a timeout                          synchronous code is stopped (vm's watchdog) and an awaited
//	                                   promise no longer waited for (what it runs later keeps
//	                                   running); variables kept; error {"code":"Timeout"} and
//	                                   stderr "TimeoutError: the execution timed out after N
//	                                   seconds". Code that blocks the event loop outside the
//	                                   cell's own run (after an await) is killed after a grace
//	                                   period and the process restarted (variables lost)
//	the JavaScript heap                capped at the sandbox's memory limit; past it Node.js stops
//	                                   ("JavaScript heap out of memory") and the next execution
//	                                   restarts it
//	metadata                           runtimes [{"name":"node","version":...}], no
//	                                   preInstalledPackages, no jupyterKernel (no Jupyter kernel
//	                                   runs)
package emulator
