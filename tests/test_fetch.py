#!/usr/bin/env python3
"""Models by URL and Hugging Face name (src/net, `wgml pull`, every -m) against the local
HTTP server of tests/net/http_server.py; nothing here reaches the internet.

    test_fetch.py WGML_CLI

Checks: a plain URL, then its revalidation (If-None-Match, 304, the file untouched); a
connection dropped mid-file and resumed with Range; a download interrupted in an earlier run
resumed from its .part (and restarted when the server's file changed); a wrong size, a wrong
SHA-256, a 404 (no file left behind, non-zero exit naming the problem); a redirect; hf:// by
file, by quantization tag and by default, a repository fetched as a folder; a gated
repository with and without HF_TOKEN (the token never printed, and never sent to the host
redirected to); offline mode; a server gone (the cached copy used); two processes fetching one
file at once; the progress bar on a terminal; `wgml run` and `wgml info` on a model by URL.
"""
import hashlib
import json
import os
import pty
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "net"))
from http_server import Server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("WGML_CLI", os.path.join(ROOT, "build", "wgml"))
MODEL = os.path.join(ROOT, "models", "stories260K.gguf")
TOKEN = "hf_s3cret_t0ken_for_tests"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Env:
    def __init__(self, tmp, server):
        self.tmp, self.server = tmp, server
        self.cache = os.path.join(tmp, "cache")
        self.base = dict(os.environ)
        for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WGML_OFFLINE", "HF_HUB_OFFLINE", "HF_ENDPOINT"):
            self.base.pop(k, None)
        self.base["WGML_CACHE_DIR"] = self.cache
        self.base["HF_ENDPOINT"] = "http://localhost:%d" % server.port

    def run(self, *args, env=None, timeout=120):
        e = dict(self.base)
        e.update(env or {})
        p = subprocess.run([CLI] + list(args), env=e, capture_output=True, text=True, timeout=timeout)
        check(TOKEN not in p.stdout and TOKEN not in p.stderr, "the token is not printed (%s)" % args[0])
        return p

    def pull(self, model, env=None):
        p = self.run("pull", model, env=env)
        return p.returncode, p.stdout.strip(), p.stderr.strip()


def leftovers(folder):
    out = []
    for dirpath, _, names in os.walk(folder):
        out += [os.path.join(dirpath, n) for n in names if n.endswith((".part", ".etag", ".tmp"))]
    return out


def main():
    if not os.path.exists(MODEL):
        print("no %s" % MODEL)
        return 1
    tmp = tempfile.mkdtemp(prefix="wgml-fetch-")
    root = os.path.join(tmp, "root")
    os.makedirs(os.path.join(root, "files", "sub"))
    shutil.copy(MODEL, os.path.join(root, "files", "stories260K.gguf"))
    shutil.copy(MODEL, os.path.join(root, "files", "sub", "again.gguf"))
    big = os.path.join(root, "files", "big.bin")
    with open(big, "wb") as f:
        f.write(os.urandom(24 << 20))
    repo = os.path.join(root, "hf", "owner", "repo-GGUF")
    os.makedirs(repo)
    for name in ("model-Q4_K_M.gguf", "model-Q8_0.gguf", "model-Q4_K.gguf"):
        shutil.copy(MODEL, os.path.join(repo, name))
    with open(os.path.join(repo, "README.md"), "w") as f:
        f.write("a test repository\n")
    folder = os.path.join(root, "hf", "owner", "bert-base")
    os.makedirs(folder)
    for name, text in (("config.json", '{"model_type": "bert"}'), ("model.safetensors", "x" * 1000),
                       ("tokenizer.json", "{}"), ("README.md", "readme"), ("pytorch_model.bin", "y" * 100)):
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    gated = os.path.join(root, "hf", "gated", "private-GGUF")
    os.makedirs(gated)
    shutil.copy(MODEL, os.path.join(gated, "private-Q8_0.gguf"))

    server = Server(root, token=TOKEN)
    env = Env(tmp, server)
    url = server.url
    models = os.path.join(env.cache, "models")
    want = sha(MODEL)
    try:
        # ---- a plain URL, then its revalidation ----
        rc, path, err = env.pull(url + "/files/stories260K.gguf")
        check(rc == 0 and path == os.path.join(models, "url", "127.0.0.1_%d" % server.port, "files",
                                                "stories260K.gguf"), "a URL into the cache: %s %s" % (path, err))
        check(rc == 0 and sha(path) == want, "the bytes are the file's")
        mtime = os.stat(path).st_mtime_ns
        server.reset()
        rc, path2, err = env.pull(url + "/files/stories260K.gguf")
        log = server.log()
        check(rc == 0 and path2 == path and os.stat(path).st_mtime_ns == mtime, "a second pull keeps the file")
        check(len(log) == 1 and log[0]["if_none_match"] == '"v1-%d"' % os.path.getsize(MODEL),
              "revalidated with If-None-Match: %s" % log)

        # ---- a server without ETags: Last-Modified and If-Modified-Since ----
        rc, path, err = env.pull(url + "/noetag/stories260K.gguf")
        check(rc == 0 and sha(path) == want and "modified " in open(path + ".meta").read(),
              "a file without an ETag, its Last-Modified kept: %s" % err)
        server.reset()
        mtime = os.stat(path).st_mtime_ns
        rc, path2, err = env.pull(url + "/noetag/stories260K.gguf")
        log = server.log()
        check(rc == 0 and os.stat(path).st_mtime_ns == mtime and len(log) == 1 and log[0]["if_modified_since"],
              "revalidated with If-Modified-Since (304): %s" % log)

        rc, path, err = env.pull(url + "/bare/stories260K.gguf")
        server.reset()
        rc2, path2, err = env.pull(url + "/bare/stories260K.gguf")
        check(rc == 0 and rc2 == 0 and sha(path2) == want and not server.log(),
              "neither ETag nor Last-Modified: the cached copy is kept without a request")

        # ---- a dropped connection, resumed with Range ----
        server.reset()
        rc, path, err = env.pull(url + "/drop/stories260K.gguf")
        log = server.log()
        half = os.path.getsize(MODEL) // 2
        check(rc == 0 and sha(path) == want, "a dropped connection is resumed: %s" % err)
        check([r["range"] for r in log] == [None, "bytes=%d-" % half] and log[1]["if_range"] is not None,
              "the second request asks for the rest: %s" % [(r["range"], r["if_range"]) for r in log])
        check("resuming" in err, "the retry is reported: %s" % err)

        # ---- a download interrupted in an earlier run ----
        dest = os.path.join(models, "url", "127.0.0.1_%d" % server.port, "files", "sub", "again.gguf")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        third = os.path.getsize(MODEL) // 3
        with open(MODEL, "rb") as f, open(dest + ".part", "wb") as g:
            g.write(f.read(third))
        with open(dest + ".part.etag", "w") as g:
            g.write("v1-%d" % os.path.getsize(MODEL))
        server.reset()
        rc, path, err = env.pull(url + "/files/sub/again.gguf")
        log = server.log()
        check(rc == 0 and path == dest and sha(path) == want, "an interrupted download is finished: %s" % err)
        check(len(log) == 1 and log[0]["range"] == "bytes=%d-" % third, "it asks for the rest only: %s" % log)
        check(not leftovers(models), "no partial files remain")
        # the same, when the file on the server has changed since (If-Range does not match: 200, all of it)
        os.remove(dest)
        with open(dest + ".part", "wb") as g:
            g.write(b"\0" * third)
        with open(dest + ".part.etag", "w") as g:
            g.write("v0-old")
        rc, path, err = env.pull(url + "/files/sub/again.gguf")
        check(rc == 0 and sha(path) == want, "a partial file of an older version is replaced: %s" % err)

        # ---- what must fail, leaving nothing behind ----
        for what, u, words in (("a wrong size", "/wrongsize/stories260K.gguf", "bytes, but the file has"),
                               ("a wrong SHA-256", "/badsha/stories260K.gguf", "SHA-256"),
                               ("a 404", "/files/missing.gguf", "404")):
            rc, path, err = env.pull(url + u)
            name = os.path.join(models, "url", "127.0.0.1_%d" % server.port) + u
            check(rc != 0 and words in err and not os.path.exists(name) and not leftovers(models),
                  "%s fails and leaves no file: %s" % (what, err))
        rc, path, err = env.pull(url + "/redirect/stories260K.gguf")
        check(rc == 0 and sha(path) == want, "a redirect is followed: %s" % err)
        rc, _, err = env.pull("http://127.0.0.1:1/nothing.gguf")
        check(rc != 0 and "127.0.0.1:1" in err, "no server there: %s" % err)

        # ---- Hugging Face: by file, by tag, by default, a folder ----
        hf = os.path.join(models, "hf", "owner", "repo-GGUF")
        server.reset()
        rc, path, err = env.pull("owner/repo-GGUF:Q8_0")
        check(rc == 0 and path == os.path.join(hf, "model-Q8_0.gguf") and sha(path) == want,
              "owner/repo:Q8_0 picks model-Q8_0.gguf: %s %s" % (path, err))
        log = server.log()
        check([r["path"].split("?")[0] for r in log] == ["/api/models/owner/repo-GGUF/tree/main",
                                                         "/owner/repo-GGUF/resolve/main/model-Q8_0.gguf",
                                                         "/cdn/owner/repo-GGUF/model-Q8_0.gguf"],
              "the file list, then the file through the CDN: %s" % [r["path"] for r in log])
        meta = open(path + ".meta").read()
        check("sha256 " + want in meta, "the SHA-256 checked is kept beside the file")
        server.reset()
        rc, path, err = env.pull("hf://owner/repo-GGUF:Q8_0")
        check(rc == 0 and [r["path"].split("?")[0] for r in server.log()] == [
            "/api/models/owner/repo-GGUF/tree/main"], "a cached file of the same SHA-256 is not fetched again")
        rc, path, err = env.pull("hf://owner/repo-GGUF")
        check(rc == 0 and path.endswith("/model-Q4_K_M.gguf"), "hf://owner/repo takes Q4_K_M: %s %s" % (path, err))
        rc, path, err = env.pull("hf://owner/repo-GGUF:q4_k")
        check(rc == 0 and path.endswith("/model-Q4_K.gguf"), "the tag Q4_K is not Q4_K_M: %s" % path)
        rc, path, err = env.pull("hf://owner/repo-GGUF/model-Q4_K.gguf")
        check(rc == 0 and path == os.path.join(hf, "model-Q4_K.gguf"), "hf://owner/repo/file: %s %s" % (path, err))
        rc, path, err = env.pull("owner/repo-GGUF:Q2_K")
        check(rc != 0 and "Q2_K" in err and "model-Q8_0.gguf" in err, "a missing tag lists the files: %s" % err)
        rc, path, err = env.pull("owner/no-such-repo:Q8_0")
        check(rc != 0 and "404" in err, "a missing repository: %s" % err)
        rc, path, err = env.pull("hf://owner/bert-base")
        got = sorted(os.listdir(path)) if rc == 0 else []
        check(rc == 0 and path == os.path.join(models, "hf", "owner", "bert-base") and
              [n for n in got if not n.endswith(".meta")] == ["config.json", "model.safetensors", "tokenizer.json"],
              "a repository without GGUF comes as a folder of its config, weights and tokenizer: %s %s" % (got, err))

        # ---- a gated repository and HF_TOKEN ----
        rc, path, err = env.pull("gated/private-GGUF:Q8_0")
        check(rc != 0 and "401" in err and "HF_TOKEN" in err, "a gated repository without a token: %s" % err)
        server.reset()
        rc, path, err = env.pull("gated/private-GGUF:Q8_0", env={"HF_TOKEN": TOKEN})
        log = server.log()
        check(rc == 0 and sha(path) == want, "with HF_TOKEN it downloads: %s" % err)
        check(all(r["token_ok"] for r in log if not r["path"].startswith("/cdn/")) and
              all(not r["authorization"] for r in log if r["path"].startswith("/cdn/")) and
              any(r["path"].startswith("/cdn/") for r in log),
              "the token goes to the hub, not to the host it redirects to: %s" %
              [(r["path"], r["authorization"]) for r in log])
        server.reset()
        rc, path, err = env.pull(url + "/files/stories260K.gguf", env={"HF_TOKEN": TOKEN})
        check(rc == 0 and not any(r["authorization"] for r in server.log()), "no token to other hosts")

        # ---- offline ----
        server.reset()
        rc, path, err = env.pull("owner/repo-GGUF:Q8_0", env={"WGML_OFFLINE": "1"})
        check(rc == 0 and path.endswith("/model-Q8_0.gguf") and not server.log(),
              "offline: from the cache, without a request: %s" % err)
        rc, path, err = env.pull("hf://owner/bert-base", env={"HF_HUB_OFFLINE": "1"})
        check(rc == 0 and path.endswith("/bert-base") and not server.log(), "offline: a folder: %s" % err)
        rc, path, err = env.pull(url + "/files/never.gguf", env={"WGML_OFFLINE": "1"})
        check(rc != 0 and "offline" in err and not server.log(), "offline: not in the cache: %s" % err)
        p = env.run("pull", "--offline", "owner/repo-GGUF:Q5_K_M")
        check(p.returncode != 0 and "Q5_K_M" in p.stderr, "offline: no such tag in the cache: %s" % p.stderr.strip())

        # ---- the models in use: run and info by URL ----
        local = subprocess.run([CLI, "run", "-m", MODEL, "-p", "Once upon a time", "-n", "24", "--temp", "0",
                                "--backend", "cpu"], capture_output=True, text=True, timeout=120)
        p = env.run("run", "-m", url + "/files/stories260K.gguf", "-p", "Once upon a time", "-n", "24", "--temp", "0",
                    "--backend", "cpu")
        check(p.returncode == 0 and p.stdout == local.stdout and len(p.stdout) > 20,
              "wgml run -m URL generates as from the file: %r" % p.stdout[:60])
        p = env.run("info", "hf://owner/repo-GGUF:Q8_0")
        check(p.returncode == 0 and "llama" in p.stdout, "wgml info hf://...: %s" % p.stdout.splitlines()[:2])
        p = env.run("tokenize", "-m", "owner/repo-GGUF:Q8_0", "Once upon")
        check(p.returncode == 0 and p.stdout.strip(), "wgml tokenize -m owner/repo:TAG: %s" % p.stdout.strip())

        # ---- wgml serve on a model by Hugging Face name: its id is the name ----
        e = dict(env.base)
        sp = subprocess.Popen([CLI, "serve", "-m", "hf://owner/repo-GGUF:Q8_0", "--backend", "cpu", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
        line = sp.stdout.readline()
        models_json = None
        if line.startswith("listening on http://127.0.0.1:"):
            import urllib.request
            port = int(line.rsplit(":", 1)[1])
            with urllib.request.urlopen("http://127.0.0.1:%d/v1/models" % port, timeout=30) as r:
                models_json = json.load(r)
        sp.terminate()
        sp.wait(timeout=30)
        check(models_json is not None and models_json["data"][0]["id"] == "owner/repo-GGUF:Q8_0",
              "wgml serve -m hf://owner/repo:TAG serves it as owner/repo:TAG: %s" % (models_json or line))

        # ---- two processes fetching one file at once ----
        server.reset()
        res = [None, None]

        def one(i):
            res[i] = env.pull(url + "/files/big.bin")
        ts = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        bigsha = sha(big)
        check(all(r[0] == 0 and sha(r[1]) == bigsha for r in res) and res[0][1] == res[1][1],
              "two processes at once: one file, whole: %s" % [r[2] for r in res])
        check(sum(1 for r in server.log() if r["range"] is None and r["if_none_match"] is None) == 1,
              "downloaded once (the other waited, then revalidated): %s" %
              [(r["range"], r["if_none_match"]) for r in server.log()])

        # ---- a server gone: the cached copy serves ----
        dead = Server(root)
        dead_url = dead.url
        rc, path, err = env.pull(dead_url + "/files/stories260K.gguf")
        dead.close()
        rc2, path2, err2 = env.pull(dead_url + "/files/stories260K.gguf")
        check(rc == 0 and rc2 == 0 and path2 == path and "cached copy" in err2,
              "with the server gone the cached copy is used, saying so: %s" % err2)
        rc, _, err = env.pull(dead_url + "/files/sub/again.gguf")
        check(rc != 0, "with the server gone a file not cached fails: %s" % err)

        # ---- the progress bar on a terminal ----
        os.remove(os.path.join(models, "url", "127.0.0.1_%d" % server.port, "files", "big.bin"))
        master, slave = pty.openpty()
        e = dict(env.base)
        proc = subprocess.Popen([CLI, "pull", url + "/files/big.bin"], env=e, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:
                break
            if not b:
                break
            chunks.append(b)
        proc.wait(timeout=60)
        os.close(master)
        tty = b"".join(chunks).decode(errors="replace")
        check(proc.returncode == 0 and "downloading" in tty and "MiB" in tty,
              "a progress bar on a terminal: %r" % tty[-120:])
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failed" % len(failures))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
