// Package azsessions is a client for the pool management endpoint of Azure
// Container Apps dynamic sessions: sandboxed Python sessions (the code
// interpreter) that LLM agents use to run code they write.
//
// # Getting started
//
// A Client talks to one session pool. Create it with a credential from
// azidentity (the caller needs the "Azure ContainerApps Session Executor"
// role on the pool) or, for the local emulator, without one:
//
//	cred, _ := azidentity.NewDefaultAzureCredential(nil)
//	client, err := azsessions.NewClient(os.Getenv("AZURE_POOL_MANAGEMENT_ENDPOINT"), cred, nil)
//
// A Session is named by an identifier; the service creates it on first use
// and deletes it, with its variables and files, after the pool's cooldown
// (300 to 3600 s without a call). NewSession picks a fresh random identifier:
//
//	session := client.NewSession()
//	resp, err := session.Execute(ctx, "6 * 7", nil)
//	// resp.Status == azsessions.ExecutionStatusSucceeded, string(resp.Result) == "42"
//
// A program that fails is data, not a Go error: resp.Status is
// ExecutionStatusFailed and resp.Stderr holds the traceback, so an agent can
// read it and fix its code. resp.Err() converts it to an error on demand.
//
// Files live under /mnt/data in the session: UploadFile, UploadFileFromPath,
// NewListFilesPager (or the iterator Files), GetFile, DownloadFile
// (streaming), DownloadFileToPath (atomic) and DeleteFile. Session management (Session.Get, Session.Delete, Session.Stop,
// Client.NewListSessionsPager, Client.GetMetadata) needs api-version
// 2025-02-02-preview or later.
//
// # Session pool kinds
//
// Execute runs the language of the pool: Python on a PythonLTS pool (the
// default kind), JavaScript on a NodeLTS pool (Node.js; a cell's
// declarations stay for the next ones and its last expression's value is
// Result). Images (Execution.Image) and ReturnJupyterFormatExecutionResult
// are documented for Python pools only. Shell pools take
// Session.ExecuteShell; custom-container pools forward any request to the
// session's container through Session.Do.
//
// Custom-container pools: Session.Do sends any request to the session's
// container; Session.Stop, Session.GetContainerSession and
// Client.NewListContainerSessionsPager are the pool's own .management
// routes (2025-02-02-preview or later).
//
// # API versions
//
// The service has two wire contracts. The legacy one (2024-02-02-preview,
// 2024-08-02-preview) uses code/execute and properties-wrapped bodies; the
// executions contract (2024-10-02-preview, 2025-02-02-preview and the
// default 2025-10-02-preview) uses executions and flat bodies. The client
// speaks both behind the same types; pick one with ClientOptions.APIVersion.
// An operation or option a version lacks fails before any I/O with an error
// matching ErrUnsupported.
//
// # Errors and retries
//
// Input errors are returned before any I/O and wrap ErrInvalidIdentifier,
// ErrInvalidFileName, ErrUnsupported or ErrFileTooLarge. Service errors are
// *azcore.ResponseError (status code and the service's error code); 401 and
// 403 come as *AuthError, which wraps it and says what usually causes them.
//
// NewClient checks the endpoint before any I/O: an empty one says "endpoint
// is empty", and on *.dynamicsessions.io the path must be
// /subscriptions/<sub>/resourceGroups/<rg>/sessionPools/<pool> (the pool's
// poolManagementEndpoint); custom-container endpoints
// (*.azurecontainerapps.io) and other hosts are taken as they are.
//
// File and session operations use azcore's retry policy
// (ClientOptions.Retry): 408, 429, 500, 502, 503 and 504 answers and
// transport errors are tried again, up to MaxRetries (default 3) more times,
// after (2^try − 1) × RetryDelay (default 800 ms) with jitter in [0.8, 1.3),
// each delay capped at MaxRetryDelay (default 60 s); a Retry-After hint
// wins, and one over MaxRetryDelay ends the retries at once. With the
// defaults a server that cannot be reached fails after about 9 s. Two
// transport failures are never retried, because trying again cannot help:
// a server certificate the client does not trust, and a refused connection
// to a loopback address (no emulator listening). Execute is not idempotent, so it never runs code
// twice: it is retried only when the service provably did not run it, and
// when an answer is lost it looks the execution up by its operation-id
// (executions contract) before deciding; otherwise it returns an error
// matching ErrExecutionOutcomeUnknown.
//
// # Secrets
//
// An identifier gives access to its session. The client never logs it (azcore
// redacts the identifier query parameter) and never puts it in an error
// message; tokens are handled by azcore's bearer-token policy.
//
// # Testing
//
// Package azsessionstest serves the same API in-process with a scripted or a
// sandboxed Python executor and hands back a ready *Client (Server.Client),
// or options for the caller's own constructor and credential
// (Server.ClientOptions); the binary cmd/azsessions-emulator serves it on
// loopback for any client.
package azsessions
