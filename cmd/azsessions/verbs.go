package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/azsessions/azsessions"
)

func init() {
	verbs = []*verb{execVerb, shVerb, uploadVerb, lsVerb, downloadVerb, rmVerb, sessionsVerb, metadataVerb, shellVerb}
}

// errCodeFailed is returned when the code ran and failed: exit status 1,
// nothing more printed (the traceback is already on stderr).
var errCodeFailed = &exitError{code: exitCodeFailed, err: errors.New("the code failed")}

// capture returns a context that records the last HTTP response of an
// operation, for --json.
func capture(ctx context.Context) (context.Context, **http.Response) {
	resp := new(*http.Response)
	return policy.WithCaptureResponse(ctx, resp), resp
}

// rawItems returns the service's objects in a response body: the elements of
// "value" (a file list) or "sessions" (a session list), else the body itself.
func rawItems(resp *http.Response) ([]json.RawMessage, error) {
	if resp == nil {
		return nil, nil
	}
	body, err := runtime.Payload(resp)
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, nil
	}
	var list struct {
		Value    *[]json.RawMessage `json:"value"`
		Sessions *[]json.RawMessage `json:"sessions"`
	}
	if json.Unmarshal(body, &list) == nil {
		switch {
		case list.Value != nil:
			return *list.Value, nil
		case list.Sessions != nil:
			return *list.Sessions, nil
		}
	}
	return []json.RawMessage{json.RawMessage(body)}, nil
}

// printJSON writes v indented, with a newline.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printRawAnswer prints the one object of an execution's answer (--json).
func (c *cli) printRawAnswer(resp *http.Response) error {
	items, err := rawItems(resp)
	if err != nil || len(items) != 1 {
		return fmt.Errorf("the service's answer could not be read again: %v", err)
	}
	return c.printJSON(items[0])
}

// ---- exec

var execVerb = &verb{
	name:    "exec",
	usage:   "exec [flags] [CODE]",
	summary: "run Python code (from an argument, --file or stdin)",
	details: `Runs CODE in the session's Python kernel (state persists across calls on the
same session). Without CODE and --file the code is read from stdin.

The program's stdout and stderr are printed as they are, on stdout and stderr;
then the value of the last expression, if any, on stdout. An image result (a
matplotlib figure as the last value) is saved with --save-images. The exit
status is 1 when the code failed (an exception or a syntax error: the traceback
is on stderr) or was canceled (its timeout passed).

With --emulator the embedded emulator lasts for this one command: its variables
and files end with it (a note on stderr says so), so a second --emulator exec
starts afresh. To keep them, use 'azsessions --emulator shell', or run
azsessions-emulator and set AZURE_POOL_MANAGEMENT_ENDPOINT.`,
	examples: `azsessions --emulator exec 'import sys; sys.version'
azsessions exec --session demo-1 --file analysis.py --timeout 2m
echo 'print(6*7)' | azsessions exec
azsessions --emulator exec --save-images plots 'import matplotlib.pyplot as plt; plt.plot([1,3,2]); plt.gcf()'
azsessions exec --json 'x = 1' | jq .status`,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli) error {
		file := fs.String("file", "", "read the code from `FILE` (- for stdin)")
		fs.StringVar(file, "f", "", "shorthand for --file `FILE`")
		timeout := new(time.Duration)
		fs.Var((*secondsFlag)(timeout), "timeout", "how long the code may run: seconds (30) or a duration (30s, 2m); default the service's maximum, 220s")
		saveImages := fs.String("save-images", "", "save image results in `DIR` as image-N.png (created if missing; never overwrites)")
		return func(ctx context.Context, c *cli) error {
			code, err := c.execCode(*file)
			if err != nil {
				return err
			}
			if *timeout < 0 || *timeout%time.Second != 0 {
				return usageErrorf("--timeout must be a positive whole number of seconds, such as 30, 30s or 2m")
			}
			if *timeout > azsessions.DefaultExecutionTimeout {
				return usageErrorf("--timeout %ds is more than the service's cap, %ds", *timeout/time.Second, azsessions.DefaultExecutionTimeout/time.Second)
			}
			return c.execute(ctx, code, *timeout, *saveImages)
		}
	},
}

// execCode returns the code from the argument, the file or stdin.
func (c *cli) execCode(file string) (string, error) {
	switch {
	case len(c.args) > 1:
		return "", usageErrorf("give the code as one argument (quote it), with --file or on stdin")
	case len(c.args) == 1 && file != "":
		return "", usageErrorf("give the code as an argument or with --file, not both")
	}
	var code string
	switch {
	case len(c.args) == 1:
		code = c.args[0]
	case file != "" && file != "-":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		code = string(b)
	default:
		if isTerminal(c.stdin) {
			fmt.Fprintln(c.stderr, "azsessions: reading code from stdin; end it with Ctrl-D")
		}
		b, err := io.ReadAll(c.stdin)
		if err != nil {
			return "", err
		}
		code = string(b)
	}
	if strings.TrimSpace(code) == "" {
		return "", usageErrorf("the code is empty")
	}
	return code, nil
}

// execute runs code and prints the outcome; it returns errCodeFailed when the
// code failed.
func (c *cli) execute(ctx context.Context, code string, timeout time.Duration, saveImages string) error {
	session, err := c.getSession()
	if err != nil {
		return err
	}
	cctx, raw := capture(ctx)
	resp, err := session.Execute(cctx, code, &azsessions.ExecuteOptions{Timeout: timeout})
	if err != nil {
		return err
	}
	img, isImage := resp.Image()
	if isImage && saveImages != "" {
		name, err := saveImage(saveImages, img)
		if err != nil {
			return fmt.Errorf("saving the image: %w", err)
		}
		fmt.Fprintf(c.stderr, "azsessions: saved %s (%d bytes)\n", name, len(img.Data))
	}
	if c.json {
		if err := c.printRawAnswer(*raw); err != nil {
			return err
		}
	} else {
		io.WriteString(c.stdout, resp.Stdout)
		io.WriteString(c.stderr, resp.Stderr)
		switch {
		case isImage && saveImages == "":
			fmt.Fprintf(c.stderr, "azsessions: the result is a %s image (%d bytes); --save-images DIR saves it\n", img.Format, len(img.Data))
		case !isImage:
			if text, ok := resultText(resp.Result); ok {
				if resp.Stdout != "" && !strings.HasSuffix(resp.Stdout, "\n") {
					io.WriteString(c.stdout, "\n")
				}
				io.WriteString(c.stdout, strings.TrimSuffix(text, "\n")+"\n")
			}
		}
		if resp.Truncated() {
			if s := resp.Stdout + resp.Stderr; s != "" && !strings.HasSuffix(resp.Stdout, "\n") && !strings.HasSuffix(resp.Stderr, "\n") {
				io.WriteString(c.stderr, "\n") // the cut output ends mid-line
			}
			fmt.Fprintf(c.stderr, "azsessions: note: the output reached the service's cap (%d characters) and was cut; write large output to a file under /mnt/data and download it\n", azsessions.DefaultOutputStreamsMaxLength)
		}
	}
	if resp.Err() != nil {
		if resp.Status == azsessions.ExecutionStatusCanceled && !c.json {
			fmt.Fprintln(c.stderr, "azsessions: the execution was canceled (its timeout passed?)")
		}
		return errCodeFailed
	}
	return nil
}

// resultText returns the value of the last expression for printing: a JSON
// string unquoted, other JSON as it is; nothing for "", null or no value.
func resultText(raw json.RawMessage) (string, bool) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" || s == `""` {
		return "", false
	}
	var str string
	if s[0] == '"' && json.Unmarshal(raw, &str) == nil {
		return str, true
	}
	if !json.Valid(raw) {
		return string(raw), true
	}
	return s, true
}

// saveImage writes img into dir (made if missing) under the first free name
// image-N.<format> and returns the path.
func saveImage(dir string, img azsessions.Image) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ext := strings.ToLower(img.Format)
	if ext == "" || strings.ContainsAny(ext, `/\.`) || len(ext) > 8 {
		ext = "bin"
	}
	for i := 1; i <= 100000; i++ {
		name := filepath.Join(dir, "image-"+strconv.Itoa(i)+"."+ext)
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(img.Data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(name)
			return "", err
		}
		return name, nil
	}
	return "", fmt.Errorf("no free image-N name in %s", dir)
}

// ---- upload

var uploadVerb = &verb{
	name:    "upload",
	usage:   "upload [flags] LOCAL...",
	summary: "upload files and directories to /mnt/data",
	details: `Uploads each LOCAL file to /mnt/data (or /mnt/data/--path), and each LOCAL
directory with its files and sub-directories under its own name. An existing
remote file of the same name is replaced. A progress bar shows on a terminal for
files of 1 MiB and more. Sub-directories need api-version 2024-10-02-preview or
later.`,
	examples: `azsessions upload TemperatureData.csv
azsessions upload --path inputs a.csv b.csv
azsessions upload --name data.csv ./export-2026-12-01.csv
azsessions upload ./dataset          # /mnt/data/dataset/...`,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli) error {
		dir := fs.String("path", "", "remote `DIR` under /mnt/data to upload into")
		name := fs.String("name", "", "remote `NAME` for a single file (default its base name)")
		return func(ctx context.Context, c *cli) error {
			if len(c.args) == 0 {
				return usageErrorf("name at least one local file or directory")
			}
			remoteDir, err := underDataDir(*dir)
			if err != nil {
				return err
			}
			type job struct{ local, remote string }
			var jobs []job
			for _, a := range c.args {
				fi, err := os.Stat(a)
				if err != nil {
					return err
				}
				if !fi.IsDir() {
					r := cmpOr(*name, filepath.Base(a))
					jobs = append(jobs, job{a, path.Join(remoteDir, r)})
					continue
				}
				base := filepath.Base(filepath.Clean(a))
				err = filepath.WalkDir(a, func(p string, d iofs.DirEntry, err error) error {
					if err != nil {
						return err
					}
					if !d.Type().IsRegular() {
						return nil
					}
					rel, err := filepath.Rel(a, p)
					if err != nil {
						return err
					}
					jobs = append(jobs, job{p, path.Join(remoteDir, base, filepath.ToSlash(rel))})
					return nil
				})
				if err != nil {
					return err
				}
			}
			if *name != "" && len(jobs) != 1 {
				return usageErrorf("--name needs exactly one local file")
			}
			session, err := c.getSession()
			if err != nil {
				return err
			}
			var out []json.RawMessage
			for _, j := range jobs {
				items, err := c.uploadOne(ctx, session, j.local, j.remote)
				if err != nil {
					return &contextError{context: j.local, err: err}
				}
				out = append(out, items...)
			}
			if c.json {
				return c.printJSON(out)
			}
			return nil
		}
	},
}

// progressMin is the size from which uploads show a progress bar on a terminal.
const progressMin = 1 << 20

func (c *cli) uploadOne(ctx context.Context, session *azsessions.Session, local, remote string) ([]json.RawMessage, error) {
	f, err := os.Open(local)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var body io.ReadSeeker = f
	var bar *progress
	if !c.json && fi.Size() >= progressMin && isTerminal(c.stderr) {
		bar = newProgress(c.stderr, remote, fi.Size())
		body = &progressReader{ReadSeeker: f, p: bar}
	}
	cctx, raw := capture(ctx)
	resp, err := session.UploadFile(cctx, remote, body, nil)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		return nil, err
	}
	if !c.json {
		fmt.Fprintf(c.stdout, "%s\t%d bytes\n", resp.FullPath(), resp.SizeInBytes)
		return nil, nil
	}
	return rawItems(*raw)
}

// ---- ls

var lsVerb = &verb{
	name:    "ls",
	usage:   "ls [flags]",
	summary: "list the files of the session",
	details: `Lists /mnt/data (or /mnt/data/--path): size in bytes, last modification (UTC)
and full path per line; directories end in "/". --recursive lists
sub-directories too (api-version 2025-10-02-preview).`,
	examples: `azsessions ls
azsessions ls --path outputs --recursive
azsessions ls --json | jq -r '.[].name'`,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli) error {
		dir := fs.String("path", "", "remote `DIR` under /mnt/data to list")
		recursive := fs.Bool("recursive", false, "list sub-directories too (api-version 2025-10-02-preview)")
		fs.BoolVar(recursive, "r", false, "shorthand for --recursive")
		return func(ctx context.Context, c *cli) error {
			if len(c.args) > 0 {
				return usageErrorf("ls takes no arguments (use --path DIR)")
			}
			p, err := underDataDir(*dir)
			if err != nil {
				return err
			}
			session, err := c.getSession()
			if err != nil {
				return err
			}
			pager := session.NewListFilesPager(&azsessions.ListFilesOptions{Path: p, Recursive: *recursive})
			out := []json.RawMessage{}
			for pager.More() {
				cctx, raw := capture(ctx)
				page, err := pager.NextPage(cctx)
				if err != nil {
					if p != "" && azcoreStatus(err) == http.StatusNotFound {
						return &contextError{context: "no directory " + path.Join(azsessions.DataDir, p) + " in the session", err: err}
					}
					return err
				}
				if c.json {
					items, err := rawItems(*raw)
					if err != nil {
						return err
					}
					out = append(out, items...)
					continue
				}
				for _, f := range page.Files {
					name := f.FullPath()
					if f.IsDir() {
						name += "/"
					}
					mod := "-"
					if !f.LastModifiedAt.IsZero() {
						mod = f.LastModifiedAt.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(c.stdout, "%12d  %-20s  %s\n", f.SizeInBytes, mod, name)
				}
			}
			if c.json {
				return c.printJSON(out)
			}
			return nil
		}
	},
}

// ---- download

var downloadVerb = &verb{
	name:    "download",
	usage:   "download [flags] REMOTE",
	summary: "download a file (atomically) or write it to stdout",
	details: `Downloads REMOTE (a name under /mnt/data, such as data.csv, outputs/plot.png or
/mnt/data/data.csv) to -o (default: its base name in the current directory; an
existing directory -o gets the file under its base name).
The file appears only once completely downloaded; on failure nothing is left
behind. An existing local file is kept unless --force. -o - writes to stdout.`,
	examples: `azsessions download SortedTemperatureData.csv
azsessions download -o results/plot.png outputs/plot.png --force
azsessions download -o - report.txt | less`,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli) error {
		out := fs.String("o", "", "local `PATH` (- for stdout; default the remote base name)")
		fs.StringVar(out, "output", "", "same as -o `PATH`")
		force := fs.Bool("force", false, "replace an existing local file")
		return func(ctx context.Context, c *cli) error {
			if len(c.args) != 1 {
				return usageErrorf("name one remote file")
			}
			remote := c.args[0]
			local := *out
			if local == "" || (local != "-" && isDir(local)) {
				// default: the remote base name, here or in the -o directory
				base := path.Base(remote)
				if base == "/" || base == "." || base == ".." {
					return usageErrorf("%q names no file", remote)
				}
				local = filepath.Join(local, base)
			}
			if local != "-" {
				if d := filepath.Dir(local); !isDir(d) {
					return usageErrorf("the directory %s of -o %s does not exist", d, local)
				}
			}
			session, err := c.getSession()
			if err != nil {
				return err
			}
			if local == "-" {
				resp, err := session.DownloadFile(ctx, remote, nil)
				if err != nil {
					return &contextError{context: remote, err: err}
				}
				defer resp.Body.Close()
				n, err := io.Copy(c.stdout, resp.Body)
				if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
					err = fmt.Errorf("got %d of %d bytes", n, resp.ContentLength)
				}
				return err
			}
			resp, err := session.DownloadFileToPath(ctx, remote, local, &azsessions.DownloadFileToPathOptions{Overwrite: *force})
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("%s exists: use --force to replace it, or -o another path", local)
			}
			if err != nil {
				return &contextError{context: remote, err: err}
			}
			if c.json {
				return c.printJSON(map[string]any{"path": resp.Path, "size": resp.Size, "contentType": resp.ContentType})
			}
			fmt.Fprintf(c.stdout, "%s\t%d bytes\n", resp.Path, resp.Size)
			return nil
		}
	},
}

// ---- rm

var rmVerb = &verb{
	name:    "rm",
	usage:   "rm REMOTE...",
	summary: "delete files",
	details: `Deletes each REMOTE file of /mnt/data, in order; stops at the first failure
(naming it). A directory is deleted with everything in it, and only with
--recursive: without it, rm asks the file's metadata first and refuses.`,
	examples: `azsessions rm TemperatureData.csv
azsessions rm outputs/a.png outputs/b.png
azsessions rm -r outputs`,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli) error {
		recursive := fs.Bool("recursive", false, "delete directories with everything in them")
		fs.BoolVar(recursive, "r", false, "shorthand for --recursive")
		return func(ctx context.Context, c *cli) error {
			if len(c.args) == 0 {
				return usageErrorf("name at least one remote file")
			}
			session, err := c.getSession()
			if err != nil {
				return err
			}
			for _, name := range c.args {
				if !*recursive {
					// A 404 or an api-version without metadata falls
					// through to DeleteFile, which reports it.
					if f, err := session.GetFile(ctx, name, nil); err == nil && f.IsDir() {
						return usageErrorf("%s is a directory: rm -r deletes it with everything in it", name)
					}
				}
				if _, err := session.DeleteFile(ctx, name, nil); err != nil {
					return &contextError{context: name, err: err}
				}
			}
			return nil
		}
	},
}

// ---- sessions

var sessionsVerb = &verb{
	name:    "sessions",
	usage:   "sessions list | get [ID] | delete [ID] | stop [ID]",
	summary: "list the pool's sessions; get, delete or stop one",
	details: `list prints the pool's live sessions (identifier, created, last accessed,
expires; UTC), or "no sessions" on stderr when there are none (stdout stays
empty). get, delete and stop act on ID, or on --session / AZSESSIONS_SESSION.
Needs api-version 2025-02-02-preview or later.`,
	examples: `azsessions sessions list
azsessions sessions get demo-1 --json
azsessions --session demo-1 sessions delete`,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli) error {
		return func(ctx context.Context, c *cli) error {
			if len(c.args) == 0 {
				return usageErrorf("sessions needs list, get, delete or stop")
			}
			sub, rest := c.args[0], c.args[1:]
			if sub == "list" {
				if len(rest) > 0 {
					return usageErrorf("sessions list takes no arguments")
				}
				return c.listSessions(ctx)
			}
			if sub != "get" && sub != "delete" && sub != "stop" {
				return usageErrorf("unknown sessions action %q (list, get, delete or stop)", sub)
			}
			if len(rest) > 1 {
				return usageErrorf("sessions %s takes one identifier", sub)
			}
			if len(rest) == 1 {
				c.globals.session = rest[0]
			}
			if cmpOr(c.globals.session, c.getenv(envSession)) == "" {
				return usageErrorf("sessions %s needs an identifier (an argument, --session or %s)", sub, envSession)
			}
			session, err := c.getSession()
			if err != nil {
				return err
			}
			cctx, raw := capture(ctx)
			switch sub {
			case "get":
				resp, err := session.Get(cctx, nil)
				if err != nil {
					return err
				}
				if c.json {
					return c.printRaw(*raw)
				}
				printSession(c.stdout, resp.SessionProperties)
			case "delete":
				if _, err := session.Delete(cctx, nil); err != nil {
					return err
				}
			case "stop":
				if _, err := session.Stop(cctx, nil); err != nil {
					return err
				}
			}
			return nil
		}
	},
}

func (c *cli) printRaw(resp *http.Response) error {
	items, err := rawItems(resp)
	if err != nil {
		return err
	}
	if len(items) != 1 {
		return c.printJSON(items)
	}
	return c.printJSON(items[0])
}

func (c *cli) listSessions(ctx context.Context) error {
	client, err := c.getClient()
	if err != nil {
		return err
	}
	pager := client.NewListSessionsPager(nil)
	out := []json.RawMessage{}
	printed := 0
	for pager.More() {
		cctx, raw := capture(ctx)
		page, err := pager.NextPage(cctx)
		if err != nil {
			return err
		}
		if c.json {
			items, err := rawItems(*raw)
			if err != nil {
				return err
			}
			out = append(out, items...)
			continue
		}
		for _, s := range page.Sessions {
			printSession(c.stdout, s)
			printed++
		}
	}
	if c.json {
		return c.printJSON(out)
	}
	if printed == 0 {
		// else a human sees no output at all; stdout stays empty for scripts
		fmt.Fprintln(c.stderr, "azsessions: no sessions")
	}
	return nil
}

func printSession(w io.Writer, s azsessions.SessionProperties) {
	t := func(v time.Time) string {
		if v.IsZero() {
			return "-"
		}
		return v.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "%s\tcreated %s\tlast accessed %s\texpires %s\n", s.Identifier, t(s.CreatedAt), t(s.LastAccessedAt), t(s.ExpiresAt))
}

// ---- metadata

var metadataVerb = &verb{
	name:    "metadata",
	usage:   "metadata",
	summary: "the pool's runtimes, pre-installed packages and kernel",
	details: `Prints the pool's runtimes, Jupyter kernel and pre-installed packages (api-version
2025-02-02-preview or later).`,
	examples: `azsessions metadata
azsessions metadata --json | jq '.preInstalledPackages | length'`,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli) error {
		return func(ctx context.Context, c *cli) error {
			if len(c.args) > 0 {
				return usageErrorf("metadata takes no arguments")
			}
			client, err := c.getClient()
			if err != nil {
				return err
			}
			cctx, raw := capture(ctx)
			resp, err := client.GetMetadata(cctx, nil)
			if err != nil {
				return err
			}
			if c.json {
				return c.printRaw(*raw)
			}
			for _, r := range resp.Runtimes {
				fmt.Fprintf(c.stdout, "runtime\t%s %s\n", r.Name, r.Version)
			}
			if resp.KernelName != "" {
				fmt.Fprintf(c.stdout, "kernel\t%s %s\t%s\n", resp.KernelName, resp.KernelVersion, resp.KernelDescription)
			}
			for _, p := range resp.PreInstalledPackages {
				fmt.Fprintf(c.stdout, "package\t%s %s\n", p.Name, p.Version)
			}
			return nil
		}
	},
}

// secondsFlag is a duration flag that also takes a plain number as seconds
// (the service's timeoutInSeconds unit): "30", "30s" and "2m" all parse.
type secondsFlag time.Duration

func (f *secondsFlag) String() string {
	if f == nil || *f == 0 {
		return ""
	}
	return time.Duration(*f).String()
}

func (f *secondsFlag) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		*f = secondsFlag(time.Duration(n) * time.Second)
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want seconds (30) or a duration (30s, 2m)")
	}
	*f = secondsFlag(d)
	return nil
}

// underDataDir is a --path flag as the SDK's path option: a directory under
// /mnt/data, given relative to it or as an absolute path inside it; any
// other absolute path is a usage error (the SDK would take "/etc" as
// /mnt/data/etc).
func underDataDir(dir string) (string, error) {
	if !strings.HasPrefix(dir, "/") {
		return dir, nil
	}
	rel, ok := strings.CutPrefix(path.Clean(dir), azsessions.DataDir)
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return "", usageErrorf("--path %s is outside %s", dir, azsessions.DataDir)
	}
	return strings.TrimPrefix(rel, "/"), nil
}

// isDir reports whether p is an existing local directory.
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
