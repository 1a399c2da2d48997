//go:build linux

package sandbox

// Custom containers (kernel.Container): a kernel runs the pool's command in
// its sandbox and the emulator reaches the command's port, on the
// sandbox's own loopback, by a reverse dial.
//
// Every sandbox sees a host directory of its own, beside its data directory
// (<data dir>.proxy, 0700, the sandbox user's), read-only at
// /opt/azsessions/proxy (mode none: at its host path). It stays empty
// unless StartContainer runs: then the emulator listens on a Unix socket
// "s" in it, and the driver (run_container in driver.py) starts the
// command, waits until 127.0.0.1:port accepts connections, and runs its
// forwarder: it keeps two connections open to the socket, and one that
// receives its first bytes (the emulator's request) is connected to the
// port and relayed both ways, then replaced. The sandbox keeps its network
// namespace (bwrap's private loopback; gVisor's --network=none loopback):
// nothing listens on the host's network, and connecting to a host socket
// in a mount needs nothing more than bwrap's bind and gVisor's
// --host-uds=open, which the protocol socket already uses. Session code
// that connects to the socket itself only gets requests for its own
// session. The driver exits when the command does, which ends the sandbox:
// DialContainer then fails with kernel.ErrContainerExited.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/azsessions/azsessions/internal/kernel"
)

// sandboxProxyDir is where a sandbox sees its proxy directory.
const sandboxProxyDir = sandboxSys + "/proxy"

// proxyDir is the host directory of a kernel's proxy socket.
func proxyDir(dataDir string) string { return dataDir + ".proxy" }

// makeProxyDir creates dataDir's proxy directory, 0700 and the sandbox
// user's (so that the sandbox can connect to the socket in it).
func (e *Executor) makeProxyDir(dataDir string) error {
	d := proxyDir(dataDir)
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return e.id.chown(d)
}

// containerProxy is a started container's end of the reverse dial.
type containerProxy struct {
	conns chan net.Conn // accepted forwarder connections
	done  chan struct{} // closed when the listener is gone
}

// containerStderrChars is how much of the command's start-up stderr an
// error quotes.
const containerStderrChars = 4096

// StartContainer implements kernel.Container: it starts spec.Command in the
// kernel's sandbox (after copying spec.Dir into the data directory) and
// returns once it accepts connections on spec.Port, or with an error
// wrapping kernel.ErrContainerExited or kernel.ErrContainerStartTimeout
// that quotes the command's stderr. It is called at most once per kernel.
func (k *Kernel) StartContainer(ctx context.Context, spec kernel.ContainerSpec) error {
	if spec.Port < 1 || spec.Port > 65535 || strings.TrimSpace(spec.Command) == "" {
		return errors.New("sandbox: a container needs a command and a port (1-65535)")
	}
	if spec.StartTimeout <= 0 {
		spec.StartTimeout = time.Minute
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	p, err := k.current()
	if err != nil {
		return err
	}
	if p == nil || !p.alive() {
		return fmt.Errorf("sandbox: the sandbox is not running: %w", kernel.ErrContainerExited)
	}
	k.pmu.Lock()
	started := k.ctr != nil
	k.pmu.Unlock()
	if started {
		return errors.New("sandbox: the container was started already")
	}
	if spec.Dir != "" {
		if err := k.copyIn(spec.Dir); err != nil {
			return fmt.Errorf("sandbox: copying the container's files into /mnt/data: %w", err)
		}
	}
	ln, sock, err := k.e.listenProxy(k.dataDir)
	if err != nil {
		return fmt.Errorf("sandbox: the proxy socket: %w", err)
	}
	cp := &containerProxy{conns: make(chan net.Conn), done: make(chan struct{})}
	go cp.accept(ln, filepath.Join(proxyDir(k.dataDir), "s"), p)

	nonce := []byte("\x1eazs-" + randHex(12) + "\x1e")
	p.stdout.begin(nonce, 0)
	p.stderr.begin(nonce, containerStderrChars)
	replyDone := p.awaitReply()
	defer replyDone()
	p.nextID++
	id := p.nextID
	if err := p.send(map[string]any{"op": "container", "id": id, "command": spec.Command, "port": spec.Port,
		"socket": sock, "timeout": spec.StartTimeout.Seconds(), "nonce": string(nonce)}, time.Now().Add(10*time.Second)); err != nil {
		p.kill()
		return fmt.Errorf("sandbox: starting the container: %w", kernel.ErrContainerExited)
	}
	// The driver ends a start that passes its timeout itself; this is the
	// backstop for a driver that does not answer.
	timer := time.NewTimer(spec.StartTimeout + k.e.opts.killGrace + 10*time.Second)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-p.msgs:
			if !ok {
				desc := p.exitDescription(k.e)
				p.kill()
				return fmt.Errorf("sandbox: %w before it listened on port %d (the sandbox ended: %s)%s", kernel.ErrContainerExited, spec.Port, desc, stderrNote(p))
			}
			var rep struct {
				ID       int  `json:"id"`
				OK       bool `json:"ok"`
				ExitCode *int `json:"exit_code"`
				TimedOut bool `json:"timed_out"`
			}
			if json.Unmarshal(line, &rep) != nil || rep.ID != id {
				continue
			}
			wait := time.NewTimer(2 * time.Second)
			select {
			case <-p.stderr.doneCh():
			case <-wait.C:
			}
			wait.Stop()
			switch {
			case rep.OK:
				k.pmu.Lock()
				k.ctr = cp
				k.pmu.Unlock()
				return nil
			case rep.TimedOut:
				p.kill()
				return fmt.Errorf("sandbox: %w: nothing accepted connections on port %d within %s (the command was killed)%s", kernel.ErrContainerStartTimeout, spec.Port, spec.StartTimeout, stderrNote(p))
			default:
				code := "?"
				if rep.ExitCode != nil {
					code = fmt.Sprint(*rep.ExitCode)
				}
				p.kill()
				return fmt.Errorf("sandbox: %w with status %s before it listened on port %d%s", kernel.ErrContainerExited, code, spec.Port, stderrNote(p))
			}
		case <-ctx.Done():
			p.kill()
			return ctx.Err()
		case <-timer.C:
			p.kill()
			return fmt.Errorf("sandbox: %w: the sandbox did not answer within %s", kernel.ErrContainerStartTimeout, spec.StartTimeout)
		}
	}
}

// stderrNote quotes what the command wrote to stderr during its start.
func stderrNote(p *proc) string {
	s, _ := p.stderr.result(containerStderrChars)
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return "; its stderr: " + s
}

// DialContainer implements kernel.Container: a connection to the
// container's port, relayed by the forwarder in the sandbox.
func (k *Kernel) DialContainer(ctx context.Context) (net.Conn, error) {
	k.pmu.Lock()
	cp, closed := k.ctr, k.closed
	k.pmu.Unlock()
	if closed {
		return nil, fmt.Errorf("sandbox: %w (the kernel is closed)", kernel.ErrContainerExited)
	}
	if cp == nil {
		return nil, errors.New("sandbox: no container was started in this kernel")
	}
	select {
	case c := <-cp.conns:
		return c, nil
	case <-cp.done:
		return nil, fmt.Errorf("sandbox: %w", kernel.ErrContainerExited)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// listenProxy listens on the socket of dataDir's proxy directory and
// returns the listener and the socket's path as the sandbox sees it.
func (e *Executor) listenProxy(dataDir string) (*net.UnixListener, string, error) {
	dir := proxyDir(dataDir)
	if err := e.makeProxyDir(dataDir); err != nil {
		return nil, "", err
	}
	// Bound through a descriptor of its directory: the path may be longer
	// than a socket address's 107 bytes.
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", err
	}
	_ = os.Remove(filepath.Join(dir, "s"))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d/s", dfd), Net: "unix"})
	_ = unix.Close(dfd)
	if err != nil {
		return nil, "", err
	}
	ln.SetUnlinkOnClose(false) // its name was the descriptor's: accept removes it
	host := filepath.Join(dir, "s")
	if err := e.id.chown(host); err != nil {
		_ = ln.Close()
		return nil, "", err
	}
	if e.opts.Mode == ModeNone {
		return ln, host, nil
	}
	return ln, sandboxProxyDir + "/s", nil
}

// accept hands the forwarder's connections to DialContainer until p ends;
// then it closes the listener, removes the socket and closes done.
func (cp *containerProxy) accept(ln *net.UnixListener, sock string, p *proc) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-p.dead:
		case <-p.exited:
		}
		_ = ln.Close()
	}()
	defer func() {
		wg.Wait()
		_ = os.Remove(sock)
		close(cp.done)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		select {
		case cp.conns <- c:
		case <-p.dead:
			_ = c.Close()
			return
		case <-p.exited:
			_ = c.Close()
			return
		}
	}
}

// copyIn copies the regular files and directories of src into the data
// directory, owned by the sandbox user; nothing outside src is read and
// nothing outside the data directory is written (both through os.Root, so
// a symbolic link swapped in during the walk is not followed out), symbolic
// links and special files are skipped.
func (k *Kernel) copyIn(src string) error {
	root, err := os.OpenRoot(k.dataDir)
	if err != nil {
		return err
	}
	defer root.Close()
	srcRoot, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer srcRoot.Close()
	id := k.e.id
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		switch {
		case d.IsDir():
			if err := root.Mkdir(rel, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if id != nil {
				return root.Lchown(rel, id.uid, id.gid)
			}
			return nil
		case d.Type().IsRegular():
			// O_NONBLOCK: a named pipe swapped in since the walk must not
			// block the session's start; anything but a regular file, once
			// open, is skipped as the walk skips it.
			in, err := srcRoot.OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
			if err != nil {
				return err
			}
			defer in.Close()
			fi, err := in.Stat()
			if err != nil || !fi.Mode().IsRegular() {
				return err
			}
			out, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, fi.Mode().Perm()|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, in)
			if err == nil && id != nil {
				err = out.Chown(id.uid, id.gid)
			}
			return errors.Join(err, out.Close())
		}
		return nil
	})
}
