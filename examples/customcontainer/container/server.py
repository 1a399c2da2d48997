"""The example's "container image": a small JSON notes API on Python's
standard library only, listening on the port given as its argument.

    GET  /health        {"status": "ok"}
    GET  /notes         {"notes": [{"id": 1, "text": "..."}, ...]}
    POST /notes         {"text": "..."} -> 201 {"id": N, "text": "..."}
    GET  /notes/{id}    one note, or 404 {"error": "no such note"}

Notes live in the process's memory: each session of the pool runs its own
copy of this server, so each session has its own notes, and they are gone
when the session ends.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

notes = []
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def send_json(self, status, value):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = urlsplit(self.path).path  # the query carries the pool's identifier
        if path == "/health":
            return self.send_json(200, {"status": "ok"})
        if path == "/notes":
            with lock:
                return self.send_json(200, {"notes": list(notes)})
        if path.startswith("/notes/"):
            with lock:
                for note in notes:
                    if str(note["id"]) == path[len("/notes/"):]:
                        return self.send_json(200, note)
            return self.send_json(404, {"error": "no such note"})
        self.send_json(404, {"error": "no such path"})

    def do_POST(self):
        if urlsplit(self.path).path != "/notes":
            return self.send_json(404, {"error": "no such path"})
        try:
            text = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))["text"]
        except (ValueError, KeyError, TypeError):
            return self.send_json(400, {"error": 'send {"text": "..."}'})
        with lock:
            note = {"id": len(notes) + 1, "text": str(text)}
            notes.append(note)
        self.send_json(201, note)

    def log_message(self, fmt, *args):
        pass  # the request line holds the session identifier: keep it out of logs


ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
