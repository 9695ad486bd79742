#!/usr/bin/env python3
"""A local HTTP server for the tests of models by URL (src/net): plain files,
Hugging Face's API and download URLs, and the ways a download goes wrong.
Standard library only; nothing here reaches the internet.

    python3 tests/net/http_server.py --root DIR [--port 0] [--token SECRET]

prints "http://127.0.0.1:PORT" on its first line, then serves until killed.
tests/test_fetch.py runs it in-process (Server below).

Under DIR:
  files/...                      served at /files/... (ETag "v1-SIZE", Range, If-Range, If-None-Match)
  hf/OWNER/REPO/...              a Hugging Face repository:
      GET /api/models/OWNER/REPO/tree/main   its file list (JSON, with "lfs": {"oid": sha256})
      GET /OWNER/REPO/resolve/main/PATH      302 to /cdn/OWNER/REPO/PATH on the *other* name of
                                             this host (localhost <-> 127.0.0.1, as the real hub
                                             sends files to a CDN), with X-Linked-Etag (the
                                             SHA-256) and X-Linked-Size
      GET /cdn/OWNER/REPO/PATH               the file (ETag: its SHA-256)
  A repository whose owner is "gated" answers 401 without "Authorization: Bearer TOKEN".
The ways to fail, each for any file under files/:
  /drop/PATH       the first GET of PATH sends the headers of the whole file, half of it, and
                   closes the connection; later GETs are served as /files/ (Range included)
  /wrongsize/PATH  X-Linked-Size says one byte more than the file has
  /badsha/PATH     the ETag is a SHA-256, not the file's
  /redirect/PATH   302 to /files/PATH
  /noetag/PATH     no ETag: Last-Modified, and If-Modified-Since answered with 304
  /bare/PATH       neither ETag nor Last-Modified
  anything else    404
GET /_log gives the requests so far as JSON (method, path, and the headers that matter, the
Authorization header only as present or not); GET /_reset clears it.
"""
import argparse
import hashlib
import json
import os
import sys
import threading
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the tests read /_log
        pass

    # ---- helpers ----
    def record(self):
        srv = self.server
        with srv.lock:
            srv.log.append({
                "method": self.command, "path": self.path, "host": self.headers.get("Host", ""),
                "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                "if_none_match": self.headers.get("If-None-Match"),
                "if_modified_since": self.headers.get("If-Modified-Since"),
                "authorization": self.headers.get("Authorization") is not None,
                "token_ok": self.headers.get("Authorization") == "Bearer " + srv.token if srv.token else False,
            })

    def plain(self, code, text, headers=None):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def local(self, rel):
        """The file under root for a URL path, or None (no '..', no hidden parts)."""
        parts = [p for p in unquote(rel).split("/") if p]
        if not parts or any(p.startswith(".") for p in parts):
            return None
        path = os.path.join(self.server.root, *parts)
        return path if os.path.isfile(path) else None

    def send_file(self, path, etag, extra=None, drop_after=None, linked_size=None):
        """etag None: no ETag, a Last-Modified date instead; "": neither."""
        size = os.path.getsize(path)
        start, end, code = 0, size - 1, 200
        modified = formatdate(int(os.path.getmtime(path)), usegmt=True)
        if etag == "":
            etag = modified = None
        elif etag is None:
            extra = dict(extra or {}, **{"Last-Modified": modified})
            if self.headers.get("If-Modified-Since") == modified and not self.headers.get("Range"):
                self.send_response(304)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        inm = self.headers.get("If-None-Match")
        if etag and inm and inm.strip('"') == etag and not self.headers.get("Range"):
            self.send_response(304)
            self.send_header("ETag", '"%s"' % etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        rng = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if rng and (not if_range or if_range.strip('"') in (etag, modified)):
            spec = rng.strip()
            if not spec.startswith("bytes=") or "," in spec:
                return self.plain(416, "bad range\n")
            a, _, b = spec[6:].partition("-")
            try:
                start = int(a)
                end = int(b) if b else size - 1
            except ValueError:
                return self.plain(416, "bad range\n")
            if start >= size or end < start:
                return self.plain(416, "range not satisfiable\n", {"Content-Range": "bytes */%d" % size})
            end = min(end, size - 1)
            code = 206
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        if etag is not None:
            self.send_header("ETag", '"%s"' % etag)
        self.send_header("Content-Length", str(end - start + 1))
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        if linked_size is not None:
            self.send_header("X-Linked-Size", str(linked_size))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start + 1
            if drop_after is not None:
                left = min(left, drop_after)
            while left > 0:
                chunk = f.read(min(left, 1 << 16))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)
        if drop_after is not None:
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass

    def other_host(self):
        host = self.headers.get("Host", "127.0.0.1")
        name, _, port = host.rpartition(":")
        other = "127.0.0.1" if name == "localhost" else "localhost"
        return "%s:%s" % (other, port or self.server.server_address[1])

    # ---- routes ----
    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        srv = self.server
        url = urlsplit(self.path)
        path = url.path
        if path == "/_log":
            with srv.lock:
                body = json.dumps(srv.log)
            return self.plain(200, body)
        if path == "/_reset":
            with srv.lock:
                srv.log.clear()
                srv.dropped.clear()
            return self.plain(200, "ok\n")
        self.record()
        for prefix in ("/files/", "/drop/", "/wrongsize/", "/badsha/", "/redirect/", "/noetag/", "/bare/"):
            if path.startswith(prefix):
                rel = path[len(prefix):]
                f = self.local("files/" + rel)
                if not f:
                    return self.plain(404, "not found\n")
                size = os.path.getsize(f)
                etag = "v1-%d" % size
                if prefix == "/redirect/":
                    return self.plain(302, "moved\n", {"Location": "/files/" + rel})
                if prefix == "/drop/":
                    with srv.lock:
                        first = rel not in srv.dropped
                        srv.dropped.add(rel)
                    return self.send_file(f, etag, drop_after=size // 2 if first else None)
                if prefix == "/wrongsize/":
                    return self.send_file(f, etag, linked_size=size + 1)
                if prefix == "/badsha/":
                    return self.send_file(f, "0" * 64)
                if prefix == "/noetag/":
                    return self.send_file(f, None)
                if prefix == "/bare/":
                    return self.send_file(f, "")
                return self.send_file(f, etag)
        parts = [p for p in path.split("/") if p]
        # Hugging Face: /api/models/OWNER/REPO/tree/main
        if len(parts) == 6 and parts[:2] == ["api", "models"] and parts[4:] == ["tree", "main"]:
            owner, repo = parts[2], parts[3]
            if not self.allowed(owner):
                return
            base = os.path.join(srv.root, "hf", owner, repo)
            if not os.path.isdir(base):
                return self.plain(404, json.dumps({"error": "Repository not found"}))
            out = []
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames.sort()
                for d in dirnames:
                    out.append({"type": "directory", "path": os.path.relpath(os.path.join(dirpath, d), base)})
                for n in sorted(filenames):
                    full = os.path.join(dirpath, n)
                    rel = os.path.relpath(full, base)
                    size = os.path.getsize(full)
                    entry = {"type": "file", "oid": "0" * 40, "size": size, "path": rel}
                    if not n.endswith(".json"):  # the large files are in LFS, as on the hub
                        entry["lfs"] = {"oid": sha256_of(full), "size": size, "pointerSize": 134}
                    out.append(entry)
            return self.plain(200, json.dumps(out), {"Content-Type": "application/json"})
        # Hugging Face: /OWNER/REPO/resolve/main/PATH -> the CDN on the other host name
        if len(parts) >= 5 and parts[2:4] == ["resolve", "main"]:
            owner, repo, rel = parts[0], parts[1], "/".join(parts[4:])
            if not self.allowed(owner):
                return
            f = self.local("hf/%s/%s/%s" % (owner, repo, rel))
            if not f:
                return self.plain(404, "Entry not found\n", {"X-Error-Code": "EntryNotFound"})
            sha = sha256_of(f)
            return self.plain(302, "Found\n", {
                "Location": "http://%s/cdn/%s/%s/%s" % (self.other_host(), owner, repo, rel),
                "X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(os.path.getsize(f)), "ETag": '"%s"' % sha})
        if len(parts) >= 4 and parts[0] == "cdn":
            f = self.local("hf/" + "/".join(parts[1:]))
            if not f:
                return self.plain(404, "not found\n")
            return self.send_file(f, sha256_of(f))
        return self.plain(404, "not found\n")

    def allowed(self, owner):
        srv = self.server
        if owner != "gated":
            return True
        if srv.token and self.headers.get("Authorization") == "Bearer " + srv.token:
            return True
        self.plain(401, "Access to this repository is restricted\n")
        return False


class Server:
    """The server on a thread: Server(root, token).url ("http://127.0.0.1:PORT"); close() stops it."""

    def __init__(self, root, token="", port=0):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.httpd.root = os.path.abspath(root)
        self.httpd.token = token
        self.httpd.lock = threading.Lock()
        self.httpd.log = []
        self.httpd.dropped = set()
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def log(self):
        with self.httpd.lock:
            return list(self.httpd.log)

    def reset(self):
        with self.httpd.lock:
            self.httpd.log.clear()
            self.httpd.dropped.clear()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token", default="")
    a = ap.parse_args()
    s = Server(a.root, a.token, a.port)
    print(s.url, flush=True)
    try:
        s.thread.join()
    except KeyboardInterrupt:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
