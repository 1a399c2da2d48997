# azsessions kernel driver: runs Python cells for the Go sandbox package.
#
# Protocol: newline-delimited JSON. Requests arrive on fd 3, replies leave on
# fd 4; the user's stdout/stderr (fds 1 and 2) are never used for the protocol.
# After each cell the driver writes the cell's nonce to fds 1 and 2 so that Go
# knows where the cell's output ends.
#
# Requests:  {"op":"exec","id":N,"code":"...","timeout":SECONDS,"nonce":"..."}
#            {"op":"interrupt","id":N}  (sent again until the reply of cell N)
#            {"op":"preload"}  (with "preload_gate": begin the background preload)
#            {"op":"container","id":N,"command":"...","port":P,"socket":"...",
#             "timeout":SECONDS,"nonce":"..."}  (custom containers, see run_container)
# Replies:   {"ready":true,"runner":"ipython"|"fallback","preload":[...],"gated":bool}
#            {"preloaded":[...],"preload_ms":float}  (once, after "ready")
#            {"id":N,"ok":bool,"has_value":bool,"value":JSON,"text":str|null,
#             "timed_out":bool,"interrupted":bool,"duration_ms":float}
#
# "value" is the JSON of the cell's last expression (numbers, booleans and
# strings as themselves, NaN and infinities as null, anything else as its
# text/plain form, a figure as the image object); "text" is the value's
# text/plain form from IPython's display formatter (IPython.lib.pretty: a long
# list breaks over lines), null for None, an image or no value.
#
# The driver answers "ready" as soon as it can run a cell; the modules of
# CFG["preload"] are then imported by a background thread, which sends
# "preloaded" when it is done. A cell that imports one of them meanwhile waits
# for that import (the import system's per-module locks), it does not run it
# twice. With CFG["preload_gate"] (and something to preload) the thread
# starts only when Go sends {"op":"preload"} ("gated" in the ready reply):
# the executor holds it while a burst of new sessions still waits for
# sandboxes. A cell that imports a module before then imports it itself.
import ast
import base64
import builtins
import io
import json
import linecache
import math
import os
import queue
import shutil
import signal
import sys
import threading
import time
import traceback

CMD_FD, RES_FD = 3, 4
CFG = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
sys.argv = [""]
MAX_VALUE_CHARS = int(CFG.get("max_value_chars", 1 << 20))
MAX_FIGURE_BYTES = int(CFG.get("max_figure_bytes", 8 << 20))

if CFG.get("socket"):
    # gVisor: runsc passes only fds 0-2, so the protocol comes over a Unix
    # socket that the emulator listens on; it becomes fds 3 and 4.
    import socket as _socket

    _s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    _s.connect(CFG["socket"])
    _sfd = _s.detach()
    for _fd in (CMD_FD, RES_FD):
        if _sfd != _fd:
            os.dup2(_sfd, _fd)
    if _sfd not in (CMD_FD, RES_FD):
        os.close(_sfd)
    del _s, _sfd, _socket

for _fd in (CMD_FD, RES_FD):
    try:
        os.set_inheritable(_fd, False)
    except OSError:
        pass
# Descriptors the emulator inherited without close-on-exec passed through Go
# and bwrap: none of them may reach user code. 0-2 are the cell's streams,
# 3-4 the protocol.
try:
    import resource as _resource
except ImportError:
    _resource = None
try:
    os.closerange(RES_FD + 1, min(_resource.getrlimit(_resource.RLIMIT_NOFILE)[0], 1 << 16))
except (AttributeError, OSError, ValueError):
    os.closerange(RES_FD + 1, 1024)

# What the driver calls after user code may have run (the background preload
# runs beside the first cells), bound before any user code: a cell may replace
# module attributes (resource.setrlimit with a no-op would keep RLIMIT_AS at
# its loose preload value), not these names.
_getrlimit = getattr(_resource, "getrlimit", None)
_setrlimit = getattr(_resource, "setrlimit", None)
_RLIM_INFINITY = getattr(_resource, "RLIM_INFINITY", -1)
_RLIMIT_AS = getattr(_resource, "RLIMIT_AS", None)
_RLIMIT_FSIZE = getattr(_resource, "RLIMIT_FSIZE", None)
_RLIMIT_NPROC = getattr(_resource, "RLIMIT_NPROC", None)
_RLIMIT_CORE = getattr(_resource, "RLIMIT_CORE", None)
_os_open, _os_read, _os_close, _O_RDONLY = os.open, os.read, os.close, os.O_RDONLY
_pthread_sigmask, _SIG_BLOCK = signal.pthread_sigmask, signal.SIG_BLOCK
_SIGALRM, _SIGINT = signal.SIGALRM, signal.SIGINT
_signal, _default_int_handler = signal.signal, signal.default_int_handler
_monotonic = time.monotonic
_json_dumps = json.dumps
_import = builtins.__import__
# Writes past RLIMIT_FSIZE raise OSError(EFBIG) instead of killing the process
# (the ignored disposition is inherited by subprocesses too).
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

_res = os.fdopen(RES_FD, "wb", buffering=0)
_res_lock = threading.Lock()


def reply(obj):
    data = (_json_dumps(obj, allow_nan=False) + "\n").encode()
    with _res_lock:
        view = memoryview(data)
        while view:
            n = _res.write(view)
            view = view[n:]


# ---------------------------------------------------------------- limits


def _vm_size():
    # os.open/os.read bound at start: builtins.open may have been replaced.
    try:
        fd = _os_open("/proc/self/status", _O_RDONLY)
        try:
            data = b""
            while True:
                chunk = _os_read(fd, 65536)
                if not chunk:
                    break
                data += chunk
        finally:
            _os_close(fd)
        for line in data.split(b"\n"):
            if line.startswith(b"VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _lower(res, value):
    soft, hard = _getrlimit(res)
    if hard != _RLIM_INFINITY and value > hard:
        value = hard
    _setrlimit(res, (value, value))


# Address space the background preload may map on top of the runtime before
# RLIMIT_AS is tightened to what it really mapped (numpy + pandas + pyplot map
# about 160 MiB).
PRELOAD_RESERVE = 1 << 30


def set_limits(preloading):
    # No core files: a crash never writes one nor runs the host's
    # kernel.core_pattern (a hard limit: subprocesses cannot raise it).
    if _RLIMIT_CORE is not None:
        _lower(_RLIMIT_CORE, 0)
    if CFG.get("max_file_size", 0) > 0:
        _lower(_RLIMIT_FSIZE, int(CFG["max_file_size"]))
    if CFG.get("nproc", 0) > 0:
        _lower(_RLIMIT_NPROC, int(CFG["nproc"]))
    if CFG.get("memory", 0) > 0:
        # The runtime (interpreter, thread stacks) is already mapped: user
        # code may allocate "memory" bytes on top of it, and of the preloaded
        # libraries once they are (see tighten_as_limit).
        _lower(_RLIMIT_AS, _vm_size() + int(CFG["memory"]) + (PRELOAD_RESERVE if preloading else 0))


def tighten_as_limit():
    """After the background preload: the runtime now includes the preloaded
    libraries. The limit only goes down (a cell that ran meanwhile may have
    mapped more, which then counts as runtime: at most PRELOAD_RESERVE)."""
    if CFG.get("memory", 0) > 0:
        soft, hard = _getrlimit(_RLIMIT_AS)
        want = _vm_size() + int(CFG["memory"])
        if hard == _RLIM_INFINITY or want < hard:
            try:
                _setrlimit(_RLIMIT_AS, (want, want))
            except (OSError, ValueError):
                pass


# ---------------------------------------------------------------- preload


def prepare_mpl():
    """Copies the executor's matplotlib font cache into MPLCONFIGDIR."""
    mpl_cache = CFG.get("mpl_cache")
    mpl_dir = os.environ.get("MPLCONFIGDIR")
    if mpl_dir:
        try:
            os.makedirs(mpl_dir, exist_ok=True)
            if mpl_cache and os.path.isdir(mpl_cache):
                for name in os.listdir(mpl_cache):
                    src = os.path.join(mpl_cache, name)
                    if os.path.isfile(src):
                        shutil.copy(src, os.path.join(mpl_dir, name))
        except OSError:
            pass


def preload_modules():
    return [m for m in CFG.get("preload") or () if isinstance(m, str) and m]


def _preload(mods):
    # Timer and interrupt signals are for the main thread, which runs cells.
    _pthread_sigmask(_SIG_BLOCK, {_SIGALRM, _SIGINT})
    start = _monotonic()
    done = []
    for mod in mods:
        try:
            _import(mod)
            done.append(mod)
            # A cell waiting for this import must find plt.show patched.
            patch_pyplot()
        except BaseException:  # noqa: a broken package must not kill the kernel
            pass
    try:
        tighten_as_limit()
    except BaseException:  # noqa
        pass
    reply({"preloaded": done, "preload_ms": (_monotonic() - start) * 1000.0})


_preload_started = threading.Lock()


def start_preload(mods):
    """Imports mods in a background thread, then sends "preloaded" (once:
    later calls do nothing)."""
    if not _preload_started.acquire(blocking=False):
        return
    if not mods:
        reply({"preloaded": [], "preload_ms": 0.0})
        return
    try:
        threading.Thread(target=_preload, args=(mods,), name="azsessions-preload", daemon=True).start()
    except RuntimeError:
        # No thread to be had (a cell holds the sandbox at its process
        # limit): nothing is preloaded, cells import what they need. The
        # reader thread, which starts a held preload, must not die of it: it
        # alone reads the requests.
        try:
            tighten_as_limit()
        except BaseException:  # noqa
            pass
        reply({"preloaded": [], "preload_ms": 0.0})


# ---------------------------------------------------------------- figures

_shown = []


def _png(fig):
    """The figure as PNG bytes, or None (with a note on stderr) when they
    pass max_figure_bytes: the reply would be past the emulator's bound."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    data = buf.getvalue()
    if len(data) > MAX_FIGURE_BYTES:
        print("the figure's PNG is %d bytes, over the emulator's limit of %d: it is not returned "
              "(save it under /mnt/data with savefig and download it)" % (len(data), MAX_FIGURE_BYTES),
              file=sys.stderr)
        return None
    return data


def _pyplot():
    """matplotlib.pyplot once it is imported, None before or while its import
    runs (in the preload thread, say)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or getattr(getattr(plt, "__spec__", None), "_initializing", False):
        return None
    return plt


def _patched_show(*args, **kwargs):
    plt = _pyplot()
    if plt is None:
        return
    nums = plt.get_fignums()
    if nums:
        try:
            img = _png(plt.figure(nums[-1]))
            if img is not None:
                _shown.append(img)
        except Exception as e:  # noqa
            print("could not render figure: %r" % (e,), file=sys.stderr)
    plt.close("all")


def patch_pyplot():
    plt = _pyplot()
    show = getattr(plt, "show", None)
    if show is not None and getattr(show, "__name__", "") != "_patched_show":
        plt.show = _patched_show


def take_figure():
    """PNG bytes of the last figure shown or still open in this cell, or None."""
    img = None
    plt = _pyplot()
    if plt is not None:
        try:
            nums = plt.get_fignums()
            if nums:
                img = _png(plt.figure(nums[-1]))
        except Exception as e:  # noqa
            print("could not render figure: %r" % (e,), file=sys.stderr)
        try:
            plt.close("all")
        except Exception:  # noqa
            pass
    if img is None and _shown:
        img = _shown[-1]
    del _shown[:]
    return img


# ---------------------------------------------------------------- values


def _cap(s):
    return s if len(s) <= MAX_VALUE_CHARS else s[:MAX_VALUE_CHARS]


_pretty = None


def pretty_text(v):
    """text/plain of v as IPython.lib.pretty renders it (imported on first
    use: the fallback runner only), or repr when IPython is missing."""
    global _pretty
    if _pretty is None:
        try:
            from IPython.lib.pretty import pretty as _p
        except Exception:  # noqa: no IPython
            _p = repr
        _pretty = _p
    return _pretty(v)


def to_json(v, text):
    """The JSON "value" of a cell's last expression v whose text/plain form is
    text (None when formatting failed)."""
    if v is None or isinstance(v, bool):
        return v
    mod = type(v).__module__
    if isinstance(v, int) or (mod == "numpy" and type(v).__name__.startswith(("int", "uint"))):
        try:
            n = int(v)
            json.dumps(n)
            return n
        except (ValueError, TypeError, OverflowError):
            return "<int too large to convert>"
    if isinstance(v, float) or (mod == "numpy" and type(v).__name__.startswith("float")):
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            # JSON has no NaN: the service answers null for float('nan')
            # (spec example CodeExecution_Execute_Result_NaN.json), with
            # "nan" as the Jupyter-format text.
            return None
        return f
    if isinstance(v, str):
        return _cap(v)
    if text is None:
        return "<%s object: its text/plain form could not be computed>" % type(v).__name__
    return text


def value_text(runner, v):
    """The capped text/plain form of v from the runner's display formatter,
    None for None or when the formatter failed (it prints why to stderr, as
    IPython does)."""
    if v is None:
        return None
    try:
        t = runner.text(v)
    except BaseException as e:  # noqa: a broken __repr__ of user code
        sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
        return None
    return _cap(t) if isinstance(t, str) else None


# Tracebacks shown to the user leave out the driver's own frames (the timer's
# signal handler runs on top of the cell's frames, a patched plt.show in the
# middle of them).
_DRIVER_FILE = sys._getframe().f_code.co_filename


def strip_driver_frames(tb):
    """tb without the frames of this file (relinked in place)."""
    keep = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != _DRIVER_FILE:
            keep.append(tb)
        tb = tb.tb_next
    for a, b in zip(keep, keep[1:]):
        a.tb_next = b
    if keep:
        keep[-1].tb_next = None
        return keep[0]
    return None


# ---------------------------------------------------------------- runners


class FallbackRunner:
    """Runs cells with ast + exec/eval when IPython is not importable."""

    name = "fallback"

    def __init__(self):
        self.ns = {"__name__": "__main__", "__builtins__": builtins}
        self.count = 0

    def run(self, code):
        """Returns (ok, has_value, value)."""
        self.count += 1
        filename = "<cell-%d>" % self.count
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        try:
            tree = ast.parse(code, filename)
        except (SyntaxError, ValueError) as e:
            sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
            return False, False, None
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        try:
            exec(compile(tree, filename, "exec"), self.ns)
            if last is not None:
                return True, True, eval(compile(last, filename, "eval"), self.ns)
            return True, False, None
        except BaseException as e:  # noqa: report everything the cell raised
            sys.stderr.write("".join(traceback.format_exception(type(e), e, strip_driver_frames(e.__traceback__))))
            return False, False, None

    def text(self, v):
        return pretty_text(v)


# Modules IPython imports at start-up that a kernel without a terminal or
# completion never uses: the terminal front end (IPython/__init__ imports
# IPython.terminal.embed, which pulls prompt_toolkit, the terminal debugger,
# the terminal app and its magics) and jedi (the completer's, with parso).
# Together about 60 ms and 10 MiB per kernel. They are kept out only while
# the shell starts: user code can import all of them afterwards.
_SKIP_AT_START = ("jedi", "IPython.terminal.embed")

# Modules IPython's start-up imports only to bind a name that some magics,
# top-level await or a traceback use later (issue 16: ~35 ms of the ~145 ms
# of CPU a sandbox's start took, which a burst of new sessions pays once per
# sandbox): "import asyncio" in IPython.core.async_helpers and
# IPython.core.magics.script (with ssl, concurrent.futures); "from
# urllib.request import Request, urlopen" in IPython.core.magics.code
# (%pastebin; http.client, email, ssl); "import stack_data" and "import
# pydoc" in IPython.core.ultratb (stack_data formats a traceback: pure_eval,
# executing, asttokens, decimal); "from pygments.lexers import PythonLexer"
# in IPython.core.oinspect (the HTML of obj?); "from logging.config import
# dictConfig" in traitlets.config.application (logging.handlers,
# socketserver); "import cProfile", "import pstats" in
# IPython.core.magics.execution (%prun); "import pexpect" in
# IPython.utils._process_posix (!cmd; ptyprocess, pty, tty). While the shell
# starts they are _Deferred stand-ins, the names listed forwarding calls;
# afterwards sys.modules holds them no more, so a cell's "import asyncio"
# imports the real module, and the stand-ins IPython kept import it on first
# use (the first traceback imports stack_data then).
_DEFER_AT_START = {
    "asyncio": (),
    "urllib.request": ("Request", "urlopen"),
    "stack_data": (),
    "pydoc": (),
    "pygments.lexers": ("PythonLexer",),
    "logging.config": ("dictConfig",),
    "cProfile": (),
    "pstats": (),
    "pexpect": (),
}


def _real_module(name):
    import importlib

    return importlib.import_module(name)


class _Deferred(type(sys)):
    """Stands for the module of its name: an attribute is looked up in the
    real module (imported then, if need be)."""

    def __getattr__(self, attr):
        name = type(sys).__getattribute__(self, "__name__")
        if sys.modules.get(name) is self:
            if attr.startswith("__"):
                # The import system's questions while the shell starts
                # (__path__ for a from-import...) are about the stand-in.
                raise AttributeError(attr)
            # Used while the shell starts after all: import it for real.
            del sys.modules[name]
        return getattr(_real_module(name), attr)


def _forward_call(module, attr):
    def call(*args, **kwargs):
        return getattr(_real_module(module), attr)(*args, **kwargs)

    call.__name__ = call.__qualname__ = attr
    return call


def _lazy_ipython_attr(name):
    if name == "embed":
        from IPython.terminal.embed import embed

        return embed
    raise AttributeError("module 'IPython' has no attribute %r" % (name,))


def _skip_start_modules(defer):
    import importlib.util
    import types

    saved = {name: sys.modules.get(name, _MISSING) for name in _SKIP_AT_START}
    # None in sys.modules makes "import jedi" raise ImportError, which
    # IPython.core.completer handles (no jedi completions).
    sys.modules["jedi"] = None
    stub = types.ModuleType("IPython.terminal.embed")
    stub.embed = None
    sys.modules["IPython.terminal.embed"] = stub
    deferred = {}
    for name, attrs in _DEFER_AT_START.items() if defer else ():
        try:
            if name in sys.modules or importlib.util.find_spec(name) is None:
                continue
        except (ImportError, ValueError):
            continue
        d = _Deferred(name)
        for attr in attrs:
            setattr(d, attr, _forward_call(name, attr))
        sys.modules[name] = deferred[name] = d
    return saved, stub, deferred


def _restore_start_modules(saved, stub, deferred):
    for name, mod in saved.items():
        if mod is _MISSING:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = mod
    for name, d in deferred.items():
        if sys.modules.get(name) is d:
            del sys.modules[name]
    ipython = sys.modules.get("IPython")
    if ipython is not None and getattr(ipython, "embed", _MISSING) is None:
        # IPython.embed comes from the real module on first use.
        del ipython.embed
        if not hasattr(ipython, "__getattr__"):
            ipython.__getattr__ = _lazy_ipython_attr
    terminal = sys.modules.get("IPython.terminal")
    if terminal is not None and getattr(terminal, "embed", None) is stub:
        del terminal.embed


_MISSING = object()


def make_ipython_runner():
    before = set(sys.modules)
    saved, stub, deferred = _skip_start_modules(defer=True)
    try:
        return _make_ipython_runner()
    except Exception:  # noqa
        if not deferred:
            raise
    finally:
        _restore_start_modules(saved, stub, deferred)
    # An IPython that needs a deferred module in a way its stand-in does
    # not serve (a submodule import, say): start again without stand-ins.
    for name in set(sys.modules) - before:
        del sys.modules[name]
    saved, stub, deferred = _skip_start_modules(defer=False)
    try:
        return _make_ipython_runner()
    finally:
        _restore_start_modules(saved, stub, deferred)


def _make_ipython_runner():
    from IPython.core.displayhook import DisplayHook
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets import Type
    from traitlets.config import Config

    class Hook(DisplayHook):
        got = False
        value = None

        def __call__(self, result=None):
            self.check_for_underscore()
            if self.quiet():
                return
            self.got, self.value = True, result
            if result is not None:
                try:
                    self.update_user_ns(result)
                except Exception:  # noqa
                    pass

    class Shell(InteractiveShell):
        displayhook_class = Type(Hook)

        def showtraceback(self, exc_tuple=None, *args, **kwargs):
            # The timer must not cut a traceback short (IPython then prints
            # a bare "KeyboardInterrupt")...
            _state["formatting"] = True
            try:
                if not _state["timed_out"]:
                    return super().showtraceback(exc_tuple, *args, **kwargs)
                self._show_timeout_traceback(exc_tuple)
            finally:
                _state["formatting"] = False

        def _show_timeout_traceback(self, exc_tuple):
            # ... except for a timed-out cell, whose first traceback may take
            # IPython a second or more (stack_data); the timer's next tick
            # then cuts it short and the plain Python form is shown instead.
            try:
                etype, value, tb = self._get_exc_info(exc_tuple)
            except ValueError:
                return
            try:
                _state["cuttable"] = True
                stb = self.InteractiveTB.structured_traceback(etype, value, tb)
                _state["cuttable"] = False
            except KeyboardInterrupt:
                _state["cuttable"] = False
                stb = None
            if stb is not None:
                self._showtraceback(etype, value, stb)
                return
            if tb is not None and tb.tb_frame.f_code.co_name == "run_code":
                tb = tb.tb_next  # IPython's frame
            sys.stderr.write("".join(traceback.format_exception(etype, value, tb)))

        def _get_exc_info(self, exc_tuple=None):
            etype, value, tb = super()._get_exc_info(exc_tuple)
            return etype, value, strip_driver_frames(tb)

        def _showtraceback(self, etype, evalue, stb):
            sys.stderr.write(self.InteractiveTB.stb2text(stb) + "\n")

    cfg = Config()
    cfg.HistoryManager.hist_file = ":memory:"
    cfg.InteractiveShell.colors = "NoColor"
    cfg.InteractiveShell.ast_node_interactivity = "last_expr"
    cfg.InteractiveShell.autocall = 0
    shell = Shell.instance(config=cfg)
    # The first cell of a shell costs ~1.5 ms more than the next ones (lazy
    # set-up in IPython): pay it before "ready", outside any user history.
    shell.run_cell("pass", store_history=False, silent=True)

    class Runner:
        name = "ipython"

        def run(self, code):
            hook = shell.displayhook
            hook.got, hook.value = False, None
            res = shell.run_cell(code, store_history=True)
            shell.exit_now = False
            value = hook.value
            hook.value = None
            if not res.success:
                return False, False, None
            return True, hook.got, value

        def text(self, v):
            # The kernel's own text/plain formatter (PlainTextFormatter:
            # IPython.lib.pretty with the shell's settings), already loaded
            # with the shell: no import on the first value.
            return plain(v)

    plain = shell.display_formatter.formatters["text/plain"]
    return Runner()


# ---------------------------------------------------------------- main loop

_state = {"in_cell": False, "cell_id": None, "timed_out": False, "interrupted": False,
          "formatting": False, "cuttable": False}
# Set by _reader on each interrupt (CFG["hold_cells"], tests only).
_interrupt_seen = threading.Event()


def _on_alarm(signum, frame):
    _state["timed_out"] = True
    if _state["in_cell"] and (not _state["formatting"] or _state["cuttable"]):
        # As an interrupt in Jupyter; the frame of this handler is left out
        # of the traceback (strip_driver_frames).
        raise KeyboardInterrupt()


def _reader(q):
    # Timer and interrupt signals go to the main thread, which runs the cell.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT})
    main_id = threading.main_thread().ident
    f = os.fdopen(CMD_FD, "rb")
    for line in f:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("op") == "interrupt":
            # Go sends it again until the cell ends: one that arrives before
            # the cell starts (in_cell is set by the main thread) is dropped,
            # the first that finds the cell running interrupts it, and the
            # next ones do nothing (a cell that swallows KeyboardInterrupt is
            # killed after the grace; a traceback being formatted is not cut).
            cid = msg.get("id")
            if _state["in_cell"] and not _state["interrupted"] and cid in (None, _state["cell_id"]):
                _state["interrupted"] = True
                # A real signal (not _thread.interrupt_main) also wakes a
                # blocking call such as time.sleep.
                try:
                    signal.pthread_kill(main_id, signal.SIGINT)
                except (OSError, ValueError):
                    pass
            _interrupt_seen.set()
            continue
        if msg.get("op") == "preload":
            # The executor lets the held preload begin (see start_preload).
            start_preload(preload_modules())
            continue
        q.put(msg)
    # Go closed the request pipe: exit at once.
    os._exit(0)


def main():
    for s in (sys.stdout, sys.stderr):
        try:
            # Interleave with the output of subprocesses like a terminal.
            s.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass
    prepare_mpl()
    runner = None
    if not CFG.get("no_ipython"):
        try:
            runner = make_ipython_runner()
        except Exception:  # noqa: no (usable) IPython
            pass
    if runner is None:
        runner = FallbackRunner()
    q = queue.Queue()
    threading.Thread(target=_reader, args=(q,), daemon=True).start()
    signal.signal(signal.SIGALRM, _on_alarm)
    mods = preload_modules()
    set_limits(bool(mods))
    gated = bool(mods) and bool(CFG.get("preload_gate"))
    reply({"ready": True, "runner": runner.name, "preload": mods, "gated": gated})
    if not gated:
        start_preload(mods)
    while True:
        msg = q.get()
        if msg.get("op") == "container":
            run_container(msg)
            continue
        if msg.get("op") != "exec":
            continue
        run_one(runner, msg)


def _reap(pid, flags):
    """Reaps exited children that the command left behind: under gVisor the
    driver is PID 1, so orphans become its children and would stay zombies."""
    while True:
        try:
            got, _ = os.waitpid(pid, flags)
        except (ChildProcessError, InterruptedError):
            return
        if got == 0:
            return


def run_shell(cmd):
    """Runs a Shell pool's command (a new request kind: op "exec" with
    "shell": {"command"|"argv", "stdin"}) as a subprocess in /mnt/data
    (or the working directory when there is none), its output going to the
    driver's own stdout and stderr. Returns the exit code, 128+N for a
    signal N as bash reports it; the timer's KeyboardInterrupt kills it."""
    import subprocess
    argv = cmd.get("argv")
    if not argv:
        sh = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
        argv = [sh, "-c", cmd.get("command", "")]
    cwd = "/mnt/data" if os.path.isdir("/mnt/data") else None
    for s in (sys.stdout, sys.stderr):
        s.flush()
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, cwd=cwd, stdout=1, stderr=2,
                             start_new_session=True)
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (argv[0], e.strerror or e))
        return 127 if isinstance(e, FileNotFoundError) else 126
    try:
        p.communicate((cmd.get("stdin") or "").encode())
    except BaseException:
        # the timeout or an interrupt: stop the command and all it started
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait()
        _reap(-p.pid, 0)
        raise
    _reap(-1, os.WNOHANG)
    rc = p.returncode
    return 128 - rc if rc < 0 else rc


def run_one(runner, msg):
    ok, has_value, value, img = False, False, None, None
    exit_code = None
    _state["timed_out"] = False
    _state["interrupted"] = False
    _state["cell_id"] = msg.get("id")
    timeout = float(msg.get("timeout") or 0)
    if CFG.get("hold_cells") and str(msg.get("code", "")).startswith("# hold\n"):
        # Tests: the cell starts after an interrupt arrived for it.
        _interrupt_seen.wait(60)
        _interrupt_seen.clear()
    start = time.monotonic()
    try:
        patch_pyplot()
        # Cells may have replaced the handlers: take them back for each cell.
        _signal(_SIGALRM, _on_alarm)
        # SIGINT as well (ipykernel does so for each request): Python installs
        # its KeyboardInterrupt handler only when SIGINT is at its default as
        # the driver starts, and a launcher that ignores it (a background
        # job of a shell without job control: "azsessions-emulator &" in a
        # script) passes SIG_IGN on through Go and bwrap: the interrupt of
        # a canceled cell (_reader) then did nothing and the kernel was
        # killed after the grace. Subprocesses of the cell get SIGINT at its
        # default too (exec resets a handler, not SIG_IGN).
        _signal(_SIGINT, _default_int_handler)
        if timeout > 0:
            # Fire at the timeout, then every second for code that swallows
            # KeyboardInterrupt; Go kills the kernel after a grace period.
            signal.setitimer(signal.ITIMER_REAL, timeout, 1.0)
        _state["in_cell"] = True
        try:
            if msg.get("shell") is not None:
                exit_code = run_shell(msg["shell"])
                ok = True
            else:
                ok, has_value, value = runner.run(msg.get("code", ""))
        finally:
            _state["in_cell"] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException as e:  # noqa: an interrupt that escaped the runner
        ok = False
        sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
    duration = (time.monotonic() - start) * 1000.0
    out = {"id": msg.get("id"), "ok": ok, "has_value": False, "value": None, "text": None,
           "timed_out": _state["timed_out"], "interrupted": _state["interrupted"],
           "duration_ms": duration, "exit_code": exit_code}
    try:
        patch_pyplot()
        img = take_figure()
        if ok:
            if img is not None:
                out["has_value"] = True
                out["value"] = {"type": "image", "format": "png",
                                "base64_data": base64.b64encode(img).decode()}
            elif has_value:
                text = value_text(runner, value)
                out["has_value"] = True
                out["value"] = to_json(value, text)
                out["text"] = text
        if _state["timed_out"]:
            out["ok"] = False
            sys.stderr.write("TimeoutError: the execution timed out after %g seconds\n" % timeout)
        elif _state["interrupted"]:
            out["ok"] = False
    except BaseException as e:  # noqa
        out["ok"] = False
        out["has_value"] = False
        out["value"] = None
        out["text"] = None
        sys.stderr.write("internal error while collecting the result: %r\n" % (e,))
    del value
    nonce = msg.get("nonce", "").encode()
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        for s in (stream, sys.__stdout__ if fd == 1 else sys.__stderr__):
            try:
                s.flush()
            except BaseException:  # noqa
                pass
        try:
            os.write(fd, nonce)
        except OSError:
            pass
    reply(out)


# ---------------------------------------------------------------- custom containers


def _port_open(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def run_container(msg):
    """Starts a CustomContainer pool's command (a new request kind: op
    "container") with /bin/sh -c in /mnt/data, its output going to the
    driver's stdout and stderr, and waits until it accepts connections on
    127.0.0.1:port, it exits, or the timeout passes (its process group is
    then killed). Replies {"id","ok","exit_code","timed_out"}. Once it
    listens, the forwarder relays the emulator's connections to it, and the
    driver exits when the command does (the sandbox ends with it)."""
    import subprocess
    port = int(msg.get("port") or 0)
    timeout = float(msg.get("timeout") or 60)
    out = {"id": msg.get("id"), "ok": False, "exit_code": None, "timed_out": False}
    cwd = "/mnt/data" if os.path.isdir("/mnt/data") else None
    for s in (sys.stdout, sys.stderr):
        s.flush()
    p = None
    try:
        p = subprocess.Popen(["/bin/sh", "-c", msg.get("command", "")], stdin=subprocess.DEVNULL,
                             cwd=cwd, stdout=1, stderr=2, start_new_session=True)
    except OSError as e:
        sys.stderr.write("/bin/sh: %s\n" % (e.strerror or e,))
        out["exit_code"] = 127
    deadline = time.monotonic() + timeout
    while p is not None:
        rc = p.poll()
        if rc is not None:
            out["exit_code"] = 128 - rc if rc < 0 else rc
            break
        if _port_open(port):
            out["ok"] = True
            break
        if time.monotonic() >= deadline:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
            out["timed_out"] = True
            break
        time.sleep(0.02)
    nonce = msg.get("nonce", "").encode()
    for fd in (1, 2):
        try:
            os.write(fd, nonce)
        except OSError:
            pass
    if out["ok"]:
        threading.Thread(target=_forwarder, args=(msg.get("socket"), port), name="azsessions-forwarder", daemon=True).start()
        threading.Thread(target=_exit_with, args=(p,), name="azsessions-container", daemon=True).start()
    reply(out)


def _exit_with(p):
    """Ends the driver (and so the sandbox) when the container's command exits."""
    rc = p.wait()
    _reap(-1, os.WNOHANG)
    os._exit(0 if rc == 0 else 1)


class _End:
    """One socket of a relayed connection: out holds what its peer sent
    that is not written to it yet."""
    __slots__ = ("sock", "peer", "out", "eof", "shut", "events")

    def __init__(self, sock):
        self.sock, self.peer, self.out = sock, None, bytearray()
        self.eof = self.shut = False
        self.events = 0


def _forwarder(path, port, idle=2):
    """Relays connections between the emulator and 127.0.0.1:port, in one
    thread (the sandbox's task limit counts threads). It keeps `idle`
    connections open to the emulator's Unix socket at path; one that receives
    its first bytes is connected to the port (and replaced by a new one), then
    both directions are relayed, each with at most 64 KiB in flight, half
    closes included."""
    import selectors
    import socket
    buf = 1 << 16
    sel = selectors.DefaultSelector()
    offered = [0]

    def offer():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
        except OSError:
            s.close()
            return False
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, None)
        offered[0] += 1
        return True

    def watch(e):
        ev = 0
        if not e.eof and len(e.peer.out) < buf:
            ev |= selectors.EVENT_READ
        if e.out:
            ev |= selectors.EVENT_WRITE
        if ev == e.events:
            return
        if e.events == 0:
            sel.register(e.sock, ev, e)
        elif ev == 0:
            sel.unregister(e.sock)
        else:
            sel.modify(e.sock, ev, e)
        e.events = ev

    def close(e):
        for x in (e, e.peer):
            if x.events:
                sel.unregister(x.sock)
                x.events = 0
            x.sock.close()

    def shut(e):
        # e's peer sent everything and e wrote it: pass the end on.
        if e.peer.eof and not e.out and not e.shut:
            e.shut = True
            try:
                e.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    wait = 0.05
    while True:
        while offered[0] < idle:
            if not offer():
                break
        timeout = None if offered[0] >= idle else wait
        wait = min(wait * 2, 1.0) if offered[0] < idle else 0.05
        for key, mask in sel.select(timeout):
            e = key.data
            if e is None:  # an offered connection: its first bytes
                s = key.fileobj
                sel.unregister(s)
                offered[0] -= 1
                try:
                    first = s.recv(buf)
                except OSError:
                    first = b""
                t = None
                if first:
                    try:
                        t = socket.create_connection(("127.0.0.1", port), timeout=5)
                    except OSError:
                        pass
                if t is None:
                    s.close()
                    continue
                t.setblocking(False)
                a, b = _End(s), _End(t)
                a.peer, b.peer = b, a
                b.out += first
                watch(a)
                watch(b)
                continue
            try:
                if mask & selectors.EVENT_READ:
                    data = e.sock.recv(buf)
                    if data:
                        e.peer.out += data
                    else:
                        e.eof = True
                        shut(e.peer)
                if mask & selectors.EVENT_WRITE and e.out:
                    n = e.sock.send(e.out)
                    del e.out[:n]
                    shut(e)
            except BlockingIOError:
                pass
            except OSError:
                close(e)
                continue
            if e.shut and e.peer.shut:
                close(e)
                continue
            watch(e)
            watch(e.peer)


if __name__ == "__main__":
    main()
