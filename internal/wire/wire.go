package wire

import (
	"encoding/json"
	"strings"
	"time"
)

// Status words of both generations: the one list of them. The client's
// ExecutionStatus constants and internal/kernel's outcomes are these words.
const (
	LegacySuccess = "Success"
	LegacyFailure = "Failure"

	StatusNotStarted = "NotStarted"
	StatusRunning    = "Running"
	StatusSucceeded  = "Succeeded"
	StatusFailed     = "Failed"
	StatusCanceled   = "Canceled"
)

// Enum values sent by the client. The service compares them case-insensitively.
const (
	CodeInputInline       = "Inline"
	ExecutionSynchronous  = "Synchronous"
	ExecutionAsynchronous = "Asynchronous"
)

// DataDir is the session's data directory.
const DataDir = "/mnt/data"

// LegacyExecuteRequest is the body of POST code/execute (2024-02-02-preview,
// 2024-08-02-preview).
type LegacyExecuteRequest struct {
	Properties *LegacyExecuteProperties `json:"properties"`
}

// LegacyExecuteProperties is the inside of LegacyExecuteRequest.
type LegacyExecuteProperties struct {
	CodeInputType    string `json:"codeInputType"`
	ExecutionType    string `json:"executionType"`
	Code             string `json:"code"`
	TimeoutInSeconds int32  `json:"timeoutInSeconds,omitempty"`
	Identifier       string `json:"identifier,omitempty"`
}

// LegacyExecuteResponse is the answer of POST code/execute.
type LegacyExecuteResponse struct {
	ID         string                   `json:"$id,omitempty"`
	Properties LegacyExecuteResultProps `json:"properties"`
}

// LegacyExecuteResultProps is the inside of LegacyExecuteResponse. Some
// captures name the value executionResult instead of result; both are read.
type LegacyExecuteResultProps struct {
	ID                          string          `json:"$id,omitempty"`
	Status                      string          `json:"status"`
	Stdout                      string          `json:"stdout"`
	Stderr                      string          `json:"stderr"`
	Result                      json.RawMessage `json:"result"`
	ExecutionResult             json.RawMessage `json:"executionResult,omitempty"`
	ExecutionTimeInMilliseconds *int64          `json:"executionTimeInMilliseconds"`
}

// ExecuteRequest is the body of POST executions (2024-10-02-preview and later).
type ExecuteRequest struct {
	CodeInputType          string `json:"codeInputType,omitempty"`
	ExecutionType          string `json:"executionType,omitempty"`
	Code                   string `json:"code"`
	TimeoutInSeconds       int32  `json:"timeoutInSeconds"`
	OutputStreamsMaxLength *int32 `json:"outputStreamsMaxLength,omitempty"`

	// The fields below are 2025-10-02-preview's (Features.ExecutionOptions).

	// UseEmptyKernel asks for a kernel without the preloaded libraries.
	UseEmptyKernel *bool `json:"useEmptyKernel,omitempty"`
	// ReturnJupyterFormatExecutionResult asks for primitive results (bool,
	// int, float, str, None) in Jupyter's text/plain form: 'nan' for the
	// string "nan", null for None.
	ReturnJupyterFormatExecutionResult *bool `json:"returnJupyterFormatExecutionResult,omitempty"`
	// ReturnJupyterFormat is the spelling of the same flag in the spec
	// example CodeExecution_Execute_Result_None_JupyterFormat.json; the
	// emulator reads both, the client sends the swagger's.
	ReturnJupyterFormat *bool `json:"returnJupyterFormat,omitempty"`
	// ShellCommand, ExecCommandAndArgs and Stdin are for Shell pools only.
	// shellCommand is a string in the swagger and an array in Learn's Shell
	// tutorial, so it is kept raw.
	ShellCommand       json.RawMessage `json:"shellCommand,omitempty"`
	ExecCommandAndArgs []string        `json:"execCommandAndArgs,omitempty"`
	Stdin              *string         `json:"stdin,omitempty"`

	// Properties is set only by old clients that send the legacy wrapper to
	// executions; 2025-10-02-preview rejects it with SessionPropertiesMissing.
	Properties json.RawMessage `json:"properties,omitempty"`
}

// ExecuteResponse is the SessionCodeExecutionResource of the new contract.
type ExecuteResponse struct {
	ID            string         `json:"id"`
	Identifier    string         `json:"identifier"`
	ExecutionType string         `json:"executionType,omitempty"`
	Status        string         `json:"status"`
	Result        *ExecuteResult `json:"result,omitempty"`
	Error         *ErrorResponse `json:"error,omitempty"`
}

// ExecuteResult is the result object of ExecuteResponse.
type ExecuteResult struct {
	Stdout                      string          `json:"stdout"`
	Stderr                      string          `json:"stderr"`
	ExecutionResult             json.RawMessage `json:"executionResult"`
	ExecutionTimeInMilliseconds *int64          `json:"executionTimeInMilliseconds"`
}

// Image is the shape of an image result (api.md §9).
type Image struct {
	Type       string `json:"type"`
	Format     string `json:"format"`
	Base64Data string `json:"base64_data"`
}

// LegacyFileList is the answer of GET files and POST files/upload on the
// legacy contract.
type LegacyFileList struct {
	ID    string            `json:"$id,omitempty"`
	Value []LegacyFileEntry `json:"value"`
}

// LegacyFileEntry is one legacy file entry.
type LegacyFileEntry struct {
	ID         string          `json:"$id,omitempty"`
	Properties LegacyFileProps `json:"properties"`
}

// LegacyFileProps is the inside of LegacyFileEntry.
type LegacyFileProps struct {
	ID               string    `json:"$id,omitempty"`
	Filename         string    `json:"filename"`
	Size             int64     `json:"size"`
	LastModifiedTime time.Time `json:"lastModifiedTime"`
}

// File is a SessionResourceFile of the new contract.
type File struct {
	ID             string    `json:"$id,omitempty"`
	Name           string    `json:"name"`
	Directory      *string   `json:"directory,omitempty"`
	Type           string    `json:"type"`
	ContentType    string    `json:"contentType,omitempty"`
	SizeInBytes    int64     `json:"sizeInBytes"`
	LastModifiedAt time.Time `json:"lastModifiedAt"`

	// OmitSize leaves sizeInBytes out when encoding, as the service does for
	// directories before 2025-10-02-preview (spec example
	// SessionResourceFiles_List.json of 2024-10-02-preview and
	// 2025-02-02-preview). Never set by decoding.
	OmitSize bool `json:"-"`
}

// FileList is the answer of GET files on the new contract.
type FileList struct {
	Value    []File  `json:"value"`
	NextLink *string `json:"nextLink"`
}

// TimeLayout is the service's timestamp form: UTC with exactly seven
// fractional digits (.NET's round-trip format), as in the spec example
// SessionResourceFiles_List_Recursive.json ("2025-08-15T07:54:52.6564504Z")
// and Semantic Kernel's captured answers ("2024-08-06T16:21:22.2423944Z").
const TimeLayout = "2006-01-02T15:04:05.0000000Z"

// FormatTime formats t in TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := FormatTime(*t)
	return &s
}

// MarshalJSON writes lastModifiedAt in TimeLayout. Decoding takes any
// RFC 3339 time.
func (f File) MarshalJSON() ([]byte, error) {
	type plain File
	var size *int64
	if !f.OmitSize {
		size = &f.SizeInBytes
	}
	return json.Marshal(struct {
		plain
		SizeInBytes    *int64 `json:"sizeInBytes,omitempty"`
		LastModifiedAt string `json:"lastModifiedAt"`
	}{plain(f), size, FormatTime(f.LastModifiedAt)})
}

// MarshalJSON writes lastModifiedTime in TimeLayout.
func (p LegacyFileProps) MarshalJSON() ([]byte, error) {
	type plain LegacyFileProps
	return json.Marshal(struct {
		plain
		LastModifiedTime string `json:"lastModifiedTime"`
	}{plain(p), FormatTime(p.LastModifiedTime)})
}

// File type words. The service mixes cases; compare with strings.EqualFold.
const (
	FileTypeFile      = "File"
	FileTypeDirectory = "Directory"
	// FileTypeDirectoryRecursive is the word of directories in recursive
	// listings (spec example SessionResourceFiles_List_Recursive.json).
	FileTypeDirectoryRecursive = "directory"
)

// IsDirectoryType reports whether a file type word names a directory.
func IsDirectoryType(t string) bool { return strings.EqualFold(t, FileTypeDirectory) }

// Session is the Session resource of the management routes. Custom-container
// pools spell expireAt as expiresAt; both are read.
type Session struct {
	Identifier     string     `json:"identifier"`
	CreatedAt      *time.Time `json:"createdAt,omitempty"`
	LastAccessedAt *time.Time `json:"lastAccessedAt,omitempty"`
	ExpireAt       *time.Time `json:"expireAt,omitempty"`
	ExpiresAt      *time.Time `json:"expiresAt,omitempty"`
	ETag           string     `json:"etag,omitempty"`
}

// MarshalJSON writes the times in TimeLayout.
func (s Session) MarshalJSON() ([]byte, error) {
	type plain Session
	return json.Marshal(struct {
		plain
		CreatedAt      *string `json:"createdAt,omitempty"`
		LastAccessedAt *string `json:"lastAccessedAt,omitempty"`
		ExpireAt       *string `json:"expireAt,omitempty"`
		ExpiresAt      *string `json:"expiresAt,omitempty"`
	}{plain(s), formatTimePtr(s.CreatedAt), formatTimePtr(s.LastAccessedAt), formatTimePtr(s.ExpireAt), formatTimePtr(s.ExpiresAt)})
}

// Expiry returns expireAt, or expiresAt when only that is set.
func (s Session) Expiry() *time.Time {
	if s.ExpireAt != nil {
		return s.ExpireAt
	}
	return s.ExpiresAt
}

// SessionList is the answer of GET listSessions; custom-container pools answer
// with value and count instead of sessions.
type SessionList struct {
	Sessions []Session `json:"sessions,omitempty"`
	Value    []Session `json:"value,omitempty"`
	Count    *int64    `json:"count,omitempty"`
	NextLink *string   `json:"nextLink,omitempty"`
}

// Items returns sessions, or value when only that is set.
func (l SessionList) Items() []Session {
	if l.Sessions != nil {
		return l.Sessions
	}
	return l.Value
}

// NameVersion is a runtime or package entry of Metadata.
type NameVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// JupyterKernel describes the pool's kernel in Metadata.
type JupyterKernel struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	ProjectURL  string `json:"projectUrl,omitempty"`
	Description string `json:"description,omitempty"`
}

// Metadata is the answer of GET metadata.
type Metadata struct {
	Runtimes             []NameVersion  `json:"runtimes"`
	PreInstalledPackages []NameVersion  `json:"preInstalledPackages"`
	CreatedAt            *time.Time     `json:"createdAt,omitempty"`
	LastUpdatedAt        *time.Time     `json:"lastUpdatedAt,omitempty"`
	JupyterKernel        *JupyterKernel `json:"jupyterKernel,omitempty"`
}

// MarshalJSON writes the times in TimeLayout.
func (m Metadata) MarshalJSON() ([]byte, error) {
	type plain Metadata
	return json.Marshal(struct {
		plain
		CreatedAt     *string `json:"createdAt,omitempty"`
		LastUpdatedAt *string `json:"lastUpdatedAt,omitempty"`
	}{plain(m), formatTimePtr(m.CreatedAt), formatTimePtr(m.LastUpdatedAt)})
}

// ErrorResponse is the Azure Core error shape.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorResponse.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Target  string `json:"target,omitempty"`
	TraceID string `json:"traceId,omitempty"`
}

// Error codes the service uses.
const (
	CodeSessionRequestValidationFailed = "SessionRequestValidationFailed"
	CodeSessionPropertiesMissing       = "SessionPropertiesMissing"
	CodeSessionWithIdentifierNotFound  = "SessionWithIdentifierNotFound"
)

// ErrorCodeHeader is the response header that carries the error code.
const ErrorCodeHeader = "x-ms-error-code"

// Limits of the service (api.md §11).
const (
	MaxExecutionSeconds           = 220
	MaxUploadBytes                = 128 << 20 // 128 MiB
	DefaultOutputStreamsMaxLength = 4096
	DefaultCooldownSeconds        = 300
	DefaultMaxSessions            = 600
)
