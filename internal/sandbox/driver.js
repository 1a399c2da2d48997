// azsessions kernel driver for Node.js (NodeLTS session pools): runs
// JavaScript cells for the Go sandbox package. It speaks the protocol of
// driver.py, whose header describes it:
//
// Requests:  {"op":"exec","id":N,"code":"...","timeout":SECONDS,"nonce":"..."}
//            {"op":"interrupt","id":N}
// Replies:   {"ready":true,"runner":"node","preload":[]}
//            {"id":N,"ok":bool,"has_value":bool,"value":JSON,"text":str|null,
//             "timed_out":bool,"interrupted":bool,"duration_ms":float}
//
// Requests arrive on fd 3 and replies leave on fd 4, or both go over the Unix
// socket CFG.socket (gVisor). After each cell the driver writes the cell's
// nonce to fds 1 and 2 so that Go knows where the cell's output ends.
//
// A cell runs in the driver's own global context (vm.Script
// runInThisContext, as IJavascript's kernel, nel, runs it): var, let, const,
// function and class declarations stay for the next cells. Its value is the
// completion value of the script; a Promise value is awaited (as nel does).
// Code with a top-level await is rewritten as the Node.js REPL rewrites it
// (internal/repl/await, which --expose-internals makes reachable): its
// declarations are hoisted so that they stay too. The timeout stops
// synchronous code (vm's watchdog) and stops waiting for an awaited promise;
// code the promise runs later keeps running in the background.
//
// "value" is the JSON of the cell's value (numbers, booleans and strings as
// themselves, NaN and infinities as null, null as null, anything else as its
// util.inspect form); "text" is the util.inspect form (the text/plain form
// of nel's default mimer), null for null or no value.
//
// The driver's own code runs in a CommonJS module: its names are not globals
// of the cells. What it calls after user code ran is bound at start.
"use strict";

const fs = require("fs");
const net = require("net");
const path = require("path");
const util = require("util");
const vm = require("vm");
const Module = require("module");

const CFG = JSON.parse(process.argv[2] || "{}");
const MAX_VALUE_CHARS = CFG.max_value_chars || 1 << 20;
const CMD_FD = 3;
const RES_FD = 4;

const inspect = util.inspect;
const writeSync = fs.writeSync;
const stringify = JSON.stringify;
const parse = JSON.parse;
const now = () => performance.now();
const NativePromise = Promise;
const isPromise = util.types.isPromise;
const isNativeError = util.types.isNativeError;
const setTimer = setTimeout;
const clearTimer = clearTimeout;

let processTopLevelAwait = null;
try {
  processTopLevelAwait = require("internal/repl/await").processTopLevelAwait;
} catch (e) {
  // Without --expose-internals (or on a Node.js without the module) a cell
  // with a top-level await runs in an async function: its declarations are
  // local to it and it has no value.
}

// ---------------------------------------------------------------- protocol

let sock = null; // gVisor: the protocol socket

function writeAll(fd, data) {
  let buf = Buffer.from(data);
  while (buf.length > 0) {
    try {
      const n = writeSync(fd, buf);
      buf = buf.subarray(n);
    } catch (e) {
      if (e.code !== "EAGAIN") throw e;
    }
  }
}

function reply(obj) {
  const line = stringify(obj) + "\n";
  if (sock !== null) {
    sock.write(line);
  } else {
    writeAll(RES_FD, line);
  }
}

function onRequests(stream) {
  let buf = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let msg;
      try {
        msg = parse(line);
      } catch (e) {
        continue;
      }
      if (msg && msg.op === "interrupt") {
        // Go sends it again until the cell's reply: only the cell it names.
        if (cell !== null && (msg.id == null || msg.id === cell.id)) cell.interrupt();
        continue;
      }
      if (msg && msg.op === "exec") {
        queue.push(msg);
        pump();
      }
    }
  });
  // Go closed the request pipe: exit at once.
  stream.on("end", () => process.exit(0));
  stream.on("error", () => process.exit(0));
}

// ---------------------------------------------------------------- values

function cap(s) {
  return s.length <= MAX_VALUE_CHARS ? s : s.slice(0, MAX_VALUE_CHARS);
}

// text is the cell value's text/plain form: util.inspect, as nel's default
// mimer renders it; null for null (as IPython's None) or when inspect fails.
function text(v) {
  if (v === null) return null;
  try {
    return cap(inspect(v));
  } catch (e) {
    writeErr(describe(e));
    return null;
  }
}

// toJSON is the JSON "value" of a cell's value v whose text form is t.
function toJSON(v, t) {
  switch (typeof v) {
    case "boolean":
      return v;
    case "number":
      // JSON has no NaN: the service answers null for Python's float('nan')
      // (spec example CodeExecution_Execute_Result_NaN.json); the same here.
      return Number.isFinite(v) ? v : null;
    case "string":
      return cap(v);
  }
  if (v === null) return null;
  if (t === null) return "<" + typeof v + ": its text form could not be computed>";
  return t;
}

// ---------------------------------------------------------------- errors

// describe is what stderr shows for a thrown value: the stack without the
// driver's frames (where the cell was called from), or "Uncaught " and its
// inspect form for a value that is not an error.
function describe(e) {
  let s;
  try {
    if (isNativeError(e) || (e !== null && typeof e === "object" && typeof e.stack === "string")) {
      s = inspect(e);
    } else {
      s = "Uncaught " + inspect(e);
    }
  } catch (err) {
    s = "Uncaught exception (it could not be shown)";
  }
  // The frames below the first one of the driver (or of vm, which it calls)
  // are the driver's: how the cell was called.
  const out = [];
  let driver = false;
  for (const line of s.split("\n")) {
    const frame = /^\s+at /.test(line);
    if (frame && (line.includes(__filename) || line.includes("node:vm:"))) {
      driver = true;
    }
    if (!(frame && driver)) out.push(line);
  }
  return out.join("\n") + "\n";
}

function writeErr(s) {
  try {
    writeAll(2, s);
  } catch (e) {
    // stderr is gone: nothing to tell
  }
}

// Errors of code the cells left running (timers, promises) are shown, not
// fatal: the session's variables stay.
process.on("uncaughtException", (e) => writeErr(describe(e)));
process.on("unhandledRejection", (e) => writeErr(describe(e)));

// ---------------------------------------------------------------- cells

// The cells' require resolves from the working directory (/mnt/data), as a
// REPL's does; module and the built-in modules stay reachable through it.
globalThis.require = Module.createRequire(path.join(process.cwd(), "<cell>"));

const queue = [];
let running = false;
let cell = null; // the running cell: {interrupt()}
let count = 0;

class Timeout extends Error {}
class Interrupted extends Error {}

async function pump() {
  if (running) return;
  running = true;
  try {
    while (queue.length > 0) {
      await runOne(queue.shift());
    }
  } finally {
    running = false;
  }
}

// wait settles with p, or rejects at the deadline or on an interrupt.
function wait(p, deadline, stop) {
  return new NativePromise((resolve, reject) => {
    let timer = null;
    if (deadline !== Infinity) {
      timer = setTimer(() => reject(new Timeout()), Math.max(0, deadline - now()));
    }
    stop.reject = reject;
    NativePromise.resolve(p).then(
      (v) => {
        if (timer !== null) clearTimer(timer);
        resolve(v);
      },
      (e) => {
        if (timer !== null) clearTimer(timer);
        reject(e);
      },
    );
  });
}

async function runOne(msg) {
  const timeout = Number(msg.timeout) || 0;
  const start = now();
  const deadline = timeout > 0 ? start + timeout * 1000 : Infinity;
  const out = {
    id: msg.id, ok: true, has_value: false, value: null, text: null,
    timed_out: false, interrupted: false, duration_ms: 0, exit_code: null,
  };
  const stop = { reject: null, interrupted: false };
  cell = {
    id: msg.id,
    interrupt() {
      stop.interrupted = true;
      if (stop.reject !== null) stop.reject(new Interrupted());
    },
  };
  try {
    if (msg.shell != null) {
      throw new Error("this kernel runs JavaScript; Shell commands run on Shell session pools");
    }
    const value = await runCode(String(msg.code || ""), deadline, stop);
    if (value !== undefined) {
      const t = text(value);
      out.has_value = true;
      out.text = t;
      out.value = toJSON(value, t);
    }
  } catch (e) {
    out.ok = false;
    if (e instanceof Timeout || (e && e.code === "ERR_SCRIPT_EXECUTION_TIMEOUT")) {
      out.timed_out = true;
      writeErr("TimeoutError: the execution timed out after " + timeout + " seconds\n");
    } else if (e instanceof Interrupted) {
      out.interrupted = true;
      writeErr("Interrupted: the execution was canceled\n");
    } else {
      writeErr(describe(e));
    }
  }
  if (stop.interrupted) {
    out.interrupted = true;
    out.ok = false;
  }
  cell = null;
  out.duration_ms = now() - start;
  const nonce = String(msg.nonce || "");
  for (const fd of [1, 2]) {
    try {
      writeAll(fd, nonce);
    } catch (e) {
      // the stream is gone
    }
  }
  reply(out);
}

// runCode runs one cell and returns its value (undefined for none).
async function runCode(code, deadline, stop) {
  count++;
  const filename = "<cell-" + count + ">";
  let wrapped = false;
  if (processTopLevelAwait !== null && code.includes("await")) {
    try {
      const w = processTopLevelAwait(code);
      if (w !== null) {
        code = w;
        wrapped = true;
      }
    } catch (e) {
      // not valid JavaScript: compiling it as is says why
    }
  }
  let script;
  try {
    script = new vm.Script(code, { filename });
  } catch (e) {
    if (processTopLevelAwait === null && e instanceof SyntaxError && /await is only valid/.test(e.message)) {
      script = new vm.Script("(async () => {\n" + code + "\n})()", { filename, lineOffset: -1 });
    } else {
      throw e;
    }
  }
  const opts = { displayErrors: true };
  if (deadline !== Infinity) {
    opts.timeout = Math.max(1, Math.ceil(deadline - now()));
  }
  let value = script.runInThisContext(opts);
  if (wrapped) {
    const r = await wait(value, deadline, stop);
    value = r !== null && typeof r === "object" && "value" in r ? r.value : undefined;
  }
  if (isPromise(value)) {
    value = await wait(value, deadline, stop);
  }
  return value;
}

// ---------------------------------------------------------------- main

function ready() {
  reply({ ready: true, runner: "node", preload: [] });
}

if (CFG.socket) {
  // gVisor: runsc passes only fds 0-2; the protocol comes over a Unix socket
  // that the emulator listens on.
  sock = net.connect(CFG.socket, () => {
    onRequests(sock);
    ready();
  });
  sock.on("error", () => process.exit(1));
} else {
  onRequests(new net.Socket({ fd: CMD_FD, readable: true, writable: false }));
  ready();
}
