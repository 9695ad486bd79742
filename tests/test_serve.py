#!/usr/bin/env python3
"""test_serve.py - `wgml serve` over HTTP: every endpoint, every error status,
streaming (SSE framing, stop strings, usage), the API key, concurrent streams
whose greedy texts equal their solo runs, a client that disconnects mid-stream
freeing its slot, the queue limit, a clean drain on SIGTERM, keep-alive
comments that find a streamed client gone while its request waits in the queue,
/v1/embeddings with an embedding model (a one-layer `wgml synth` all-minilm-l6)
against `wgml embed`, image inputs (vision(): /v1/embeddings with {"image": ...} items
and /v1/classify on one-layer vit-base and clip-vit-b32, PNGs written with zlib) against
`wgml embed --image` and `wgml classify --json`, /v1/audio/speech with Kokoro (../shared's kokoro-tiny
converted) against `wgml speak`, byte for byte, /v1/audio/transcriptions and
/v1/audio/translations with Whisper (a `wgml synth` whisper-micro; multipart uploads
of WAVs written here) against `wgml transcribe`, and all four models served by one
process (several --model); and hostile clients (hostile(): idle, slow and too many
connections, a foreign Host or Origin, CORS, bodies a web page can send without a
preflight, ambiguous framing, a huge message beside a running stream, a gone client).

    test_serve.py WGML_CLI MODEL [all|main|models|hostile]   (ctest runs the three parts side by side, with the
                                                             build's CLI and stories260K)
Only the Python standard library: http.client is the client.
"""
import http.client
import json
import os
import shutil
import base64
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

CLI, MODEL = sys.argv[1], sys.argv[2]
KEY = "sekret-key"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def serve(model, *args, env=None):
    """`wgml serve -m model --backend cpu --port 0 args`: the process and its port."""
    p = subprocess.Popen([CLI, "serve", "-m", model, "--backend", "cpu", "--port", "0", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    if not line.startswith("listening on http://127.0.0.1:"):
        p.kill()
        sys.exit("server did not start: %r %s" % (line, p.stderr.read()))
    return p, int(line.rsplit(":", 1)[1])


def start(*extra):
    return serve(MODEL, "--parallel", "4", "--ctx-size", "256", *extra)


def stop_server(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()


def post_bytes(port, path, body, key=None):
    """A POST whose answer is not JSON: status, response, body bytes."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    c.request("POST", path, body=json.dumps(body).encode(), headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r, data


def request(port, method, path, body=None, key=KEY, raw=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = dict(headers or {})
    if key:
        h["Authorization"] = "Bearer " + key
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    if data is not None:
        h["Content-Type"] = "application/json"
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    try:
        return r.status, json.loads(text), r
    except ValueError:
        return r.status, text, r


def sse(port, path, body, key=KEY, stop_after=None):
    """The events of a streamed request (parsed JSON, '[DONE]' as a string); stop_after: disconnect after N."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body=json.dumps(body).encode(),
              headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.status
    check(r.getheader("Content-Type", "").startswith("text/event-stream"), "SSE content type")
    events, buf = [], b""
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            payload = line[6:].strip().decode()
            events.append(payload if payload == "[DONE]" else json.loads(payload))
            if stop_after and len(events) >= stop_after:
                c.sock.shutdown(socket.SHUT_RDWR)
                c.close()
                return events
        elif line.strip() and not line.startswith(b":"):  # ':' lines are comments (keep-alive)
            check(False, "an SSE line that is neither data nor a comment: %r" % line)
    c.close()
    return events


def raw_request(port, data):
    """Sends bytes as they are and returns the whole answer (up to the server's close)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    return out


def completion(port, prompt, n=24, **kw):
    body = dict(prompt=prompt, max_tokens=n, temperature=0)
    body.update(kw)
    s, o, _ = request(port, "POST", "/v1/completions", body)
    assert s == 200, (s, o)
    return o


def streamed_text(events, chat=False):
    out = ""
    for e in events:
        if isinstance(e, dict) and e.get("choices"):
            ch = e["choices"][0]
            out += (ch.get("delta", {}).get("content") or "") if chat else ch["text"]
    return out


PROMPTS = ["Once upon a time", "The little dog ran to the park", "Lily and Ben were friends",
           "One day, a boy named Tom wanted to play"]


def main():
    p, port = start("--api-key", KEY, "--queue", "6")
    try:
        # ---- the simple endpoints
        s, o, _ = request(port, "GET", "/health", key=None)
        check(s == 200 and o["slots_total"] == 4 and o["slots_free"] == 4 and o["queue_length"] == 0, "health %s" % o)
        s, o, _ = request(port, "GET", "/v1/models")
        check(s == 200 and o["object"] == "list" and o["data"][0]["id"] == "stories260K.gguf", "models %s" % o)
        s, o, _ = request(port, "GET", "/metrics", key=None)
        check(s == 200 and "wgml_slots_total 4" in o and "# TYPE wgml_time_to_first_token_seconds histogram" in o,
              "metrics")

        # ---- errors: shape and status
        def err(status, method, path, body=None, raw=None, key=KEY, code=None, param=None):
            s, o, r = request(port, method, path, body, key=key, raw=raw)
            ok = s == status and isinstance(o, dict) and set(o["error"]) == {"message", "type", "param", "code"}
            if ok and code is not None:
                ok = o["error"]["code"] == code
            if ok and param is not None:
                ok = o["error"]["param"] == param
            check(ok, "%s %s -> %s %s (wanted %d)" % (method, path, s, o, status))
            return r
        err(404, "GET", "/v1/nothing")
        r = err(405, "GET", "/v1/completions")
        check(r.getheader("Allow") == "POST", "405 Allow header")
        err(405, "POST", "/health")
        err(401, "POST", "/v1/completions", {"prompt": "x"}, key=None, code="invalid_api_key")
        err(401, "GET", "/v1/models", key="wrong", code="invalid_api_key")
        err(400, "POST", "/v1/completions", raw=b"{not json")
        err(400, "POST", "/v1/completions", raw=b'{"prompt": "x"} trailing')
        err(400, "POST", "/v1/completions", raw=b"[1, 2]")
        err(400, "POST", "/v1/completions", raw=b"")
        err(400, "POST", "/v1/completions", raw=b"[" * 100000)  # deep nesting
        err(400, "POST", "/v1/completions", raw=b'{"prompt": "\xff\xfe"}')
        err(400, "POST", "/v1/completions", {"prompt": 3}, param="prompt")
        err(400, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 0}, param="max_tokens")
        err(400, "POST", "/v1/completions", {"prompt": "x", "max_tokens": "5"}, param="max_tokens")
        err(400, "POST", "/v1/completions", {"prompt": "x", "temperature": 5}, param="temperature")
        err(400, "POST", "/v1/completions", {"prompt": "x", "top_p": 0}, param="top_p")
        err(400, "POST", "/v1/completions", {"prompt": "x", "n": 2}, param="n")
        err(400, "POST", "/v1/completions", {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, param="stop")
        err(400, "POST", "/v1/completions", {"prompt": "x", "stop": [1]}, param="stop")
        err(400, "POST", "/v1/completions", {"prompt": "x", "stop": ["a\u0000"]}, param="stop")
        err(400, "POST", "/v1/completions", {"prompt": "x", "stream": "yes"}, param="stream")
        err(400, "POST", "/v1/chat/completions", {"messages": []}, param="messages")
        err(400, "POST", "/v1/chat/completions", {"messages": [{"content": "no role"}]}, param="messages")
        err(400, "POST", "/v1/chat/completions", {"messages": "hi"}, param="messages")
        # U+0000 would cut a C string short without a word: refused, wherever it is
        err(400, "POST", "/v1/completions", {"prompt": "Once\u0000 upon"}, param="prompt")
        err(400, "POST", "/v1/completions", {"prompt": ["Once\u0000"]}, param="prompt")
        err(400, "POST", "/v1/chat/completions",
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi\u0000"}]}]}, param="messages")
        err(400, "POST", "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "\u0000"}]}, param="messages")
        err(400, "POST", "/v1/completions", {"prompt": "Once upon a time " * 200}, code="context_length_exceeded")
        err(413, "POST", "/v1/completions", raw=b'{"prompt": "' + b"a" * (1 << 20) + b'"}')
        # what civetweb refuses before routing gets a whole answer too: an HTTP/1.1 status line (not the
        # request's version, nor the bytes after a request line it cannot parse) and a JSON error
        for data, status in [(b"GET /health HTTP/2.0\r\n\r\n", 505),
                             (b"\r\n//GET /he{{p  {\"prompt\": {{alth HTTP/1.1\n\n\"x\"", 400),
                             (b"POST /v1/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 411),
                             (b"GET /health HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", 404)]:
            a = raw_request(port, data)
            head, _, body = a.partition(b"\r\n\r\n")
            try:
                o = json.loads(body)
            except ValueError:
                o = None
            check(head.startswith(b"HTTP/1.1 %d " % status) and isinstance(o, dict) and "message" in o["error"],
                  "%r -> %r" % (data[:40], a[:200]))

        # ---- completions, plain and streamed: the same greedy text, usage, finish reasons
        solo = [completion(port, q)["choices"][0]["text"] for q in PROMPTS]
        o = completion(port, PROMPTS[0])
        check(o["object"] == "text_completion" and o["choices"][0]["finish_reason"] == "length", "finish length")
        u = o["usage"]
        check(u["completion_tokens"] == 24 and u["total_tokens"] == u["prompt_tokens"] + 24, "usage %s" % u)
        check(u["prompt_tokens_details"]["cached_tokens"] > 0, "a repeated prompt reuses the slot's cache")
        ev = sse(port, "/v1/completions", dict(prompt=PROMPTS[1], max_tokens=24, temperature=0, stream=True,
                                                stream_options={"include_usage": True}))
        check(ev[-1] == "[DONE]", "SSE ends with [DONE]")
        check(ev[-2]["choices"] == [] and ev[-2]["usage"]["completion_tokens"] == 24, "usage chunk %s" % ev[-2])
        check(ev[-3]["choices"][0]["finish_reason"] == "length", "final chunk's finish_reason")
        check(streamed_text(ev) == solo[1], "streamed text = plain text")
        ev = sse(port, "/v1/completions", dict(prompt=PROMPTS[1], max_tokens=5, temperature=0, stream=True))
        check(all("usage" not in e for e in ev if isinstance(e, dict)), "no usage without include_usage")

        # ---- stop strings: the text ends before the stop, finish_reason stop, streamed or not
        full = solo[0]
        cut = full.find(" ", 12)
        stop = full[cut:cut + 4]
        o = completion(port, PROMPTS[0], stop=[stop, "zzzz"])
        check(o["choices"][0]["text"] == full[:full.find(stop)] and o["choices"][0]["finish_reason"] == "stop",
              "stop string: %r of %r" % (o["choices"][0]["text"], full))
        ev = sse(port, "/v1/completions", dict(prompt=PROMPTS[0], max_tokens=24, temperature=0, stream=True, stop=stop))
        text = streamed_text(ev)
        check(text == full[:full.find(stop)], "streamed stop: %r" % text)
        check(all(stop not in streamed_text([e]) for e in ev), "no chunk holds the stop string")
        # a stop string at the very start: no text, and still a whole stream (finish_reason, [DONE])
        ev = sse(port, "/v1/completions", dict(prompt=PROMPTS[0], max_tokens=24, temperature=0, stream=True,
                                                stop=full[0]))
        check(ev[-1] == "[DONE]" and ev[-2]["choices"][0]["finish_reason"] == "stop" and streamed_text(ev) == "",
              "a stream stopped before any text: %s" % ev)

        # ---- chat: through the template, plain and streamed
        msgs = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "Tell me one."}]
        s, o, _ = request(port, "POST", "/v1/chat/completions", dict(messages=msgs, max_tokens=16, temperature=0))
        check(s == 200 and o["object"] == "chat.completion" and o["choices"][0]["message"]["role"] == "assistant",
              "chat %s" % o)
        ev = sse(port, "/v1/chat/completions", dict(messages=msgs, max_tokens=16, temperature=0, stream=True,
                                                     stream_options={"include_usage": True}))
        check(ev[0]["object"] == "chat.completion.chunk" and ev[0]["choices"][0]["delta"].get("role") == "assistant",
              "first chat chunk has the role")
        check(streamed_text(ev, chat=True) == o["choices"][0]["message"]["content"], "chat streamed = plain")
        check(ev[-2]["usage"]["prompt_tokens"] == o["usage"]["prompt_tokens"], "chat usage")
        # a follow-up that extends the conversation reuses the cached prefix
        msgs2 = msgs + [o["choices"][0]["message"], {"role": "user", "content": "Another."}]
        s, o2, _ = request(port, "POST", "/v1/chat/completions", dict(messages=msgs2, max_tokens=8, temperature=0))
        check(s == 200 and o2["usage"]["prompt_tokens_details"]["cached_tokens"] >= o["usage"]["prompt_tokens"] - 1,
              "follow-up cached tokens %s" % o2["usage"])

        # ---- 4 concurrent streams: greedy texts equal to their solo runs
        results = [None] * 4

        def worker(i):
            results[i] = streamed_text(sse(port, "/v1/completions",
                                           dict(prompt=PROMPTS[i], max_tokens=24, temperature=0, stream=True)))
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for i in range(4):
            check(results[i] == solo[i], "concurrent stream %d: %r != solo %r" % (i, results[i], solo[i]))
        # plain curl: the raw SSE framing, byte for byte in its structure
        curl = shutil.which("curl")
        check(curl is not None or not os.environ.get("CI"), "curl is missing (scripts/setup.sh installs it)")
        if curl:
            raw = subprocess.run([curl, "-sN", "-H", "Authorization: Bearer " + KEY, "-H", "Content-Type: application/json",
                                  "-d", json.dumps(dict(messages=[dict(role="user", content=PROMPTS[0])], max_tokens=8,
                                                        temperature=0, stream=True)),
                                  "http://127.0.0.1:%d/v1/chat/completions" % port], capture_output=True, timeout=60).stdout
            events = raw.split(b"\n\n")
            check(events[-1] == b"" and events[-2] == b"data: [DONE]" and
                  all(e.startswith(b"data: {") and b"\n" not in e for e in events[:-2]) and len(events) >= 4,
                  "curl: SSE events 'data: ...' each ending in a blank line, [DONE] last: %r" % raw[:300])
            first = json.loads(events[0][6:])
            check(first["object"] == "chat.completion.chunk" and first["choices"][0]["delta"].get("role") == "assistant",
                  "curl: the first event gives the role: %r" % events[0])
        # HTTP/1.0 has no chunked encoding: the stream comes as it is, and the connection closes at its end
        body = json.dumps(dict(prompt=PROMPTS[0], max_tokens=8, temperature=0, stream=True)).encode()
        raw = raw_request(port, b"POST /v1/completions HTTP/1.0\r\nAuthorization: Bearer %s\r\nContent-Type: "
                          b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (KEY.encode(), len(body), body))
        head, _, rest = raw.partition(b"\r\n\r\n")
        events = rest.split(b"\n\n")
        check(head.startswith(b"HTTP/1.0 200") and b"transfer-encoding" not in head.lower() and
              events[-1] == b"" and events[-2] == b"data: [DONE]" and all(e.startswith(b"data: {") for e in events[:-2]),
              "HTTP/1.0: a plain SSE body up to the close: %r" % raw[:400])
        check(streamed_text([json.loads(e[6:]) for e in events[:-2]]) == completion(port, PROMPTS[0], 8)["choices"][0]["text"],
              "HTTP/1.0: the streamed text equals the non-streamed one")
        # seeded sampling: the same seed gives the same text, alone or not
        a = completion(port, PROMPTS[2], temperature=0.9, seed=7)["choices"][0]["text"]
        b = completion(port, PROMPTS[2], temperature=0.9, seed=7)["choices"][0]["text"]
        check(a == b, "seeded sampling repeats")

        # ---- a client that disconnects mid-stream frees its slot
        ev = sse(port, "/v1/completions", dict(prompt=PROMPTS[3], max_tokens=200, temperature=0, stream=True),
                 stop_after=2)
        deadline = time.time() + 10
        while time.time() < deadline:
            s, o, _ = request(port, "GET", "/health")
            if o["slots_busy"] == 0:
                break
            time.sleep(0.05)
        check(o["slots_busy"] == 0, "a disconnected stream's slot is freed: %s" % o)
        s, m, _ = request(port, "GET", "/metrics")
        check("wgml_requests_cancelled_total 1" in m, "the cancel is counted")

        # ---- the queue: 4 slots + 6 waiting; more get 503
        codes = []
        lock = threading.Lock()

        def flood():
            s, o, _ = request(port, "POST", "/v1/completions", dict(prompt=PROMPTS[0], max_tokens=200, temperature=0))
            with lock:
                codes.append((s, o))
        ts = [threading.Thread(target=flood) for _ in range(16)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        n503 = sum(1 for s, o in codes if s == 503)
        n200 = sum(1 for s, o in codes if s == 200)
        check(n200 >= 10 and n503 >= 1 and n200 + n503 == 16, "queue limit: %d x 200, %d x 503" % (n200, n503))
        check(all(len(o["choices"][0]["text"]) > 0 for s, o in codes if s == 200), "queued requests complete")
        check(all(o["error"]["type"] == "overloaded_error" for s, o in codes if s == 503), "503 shape")
        s, o, _ = request(port, "GET", "/health")
        check(o["slots_busy"] == 0 and o["queue_length"] == 0, "nothing leaked: %s" % o)
    finally:
        # ---- SIGTERM drains and exits 0
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = -1
        check(rc == 0, "exit status after SIGTERM: %s (%s)" % (rc, p.stderr.read()))

    # ---- without a key the /v1/ routes are open; --host 0.0.0.0 warns without one
    p2, port2 = start("--host", "127.0.0.1")
    s, o, _ = request(port2, "GET", "/v1/models", key=None)
    check(s == 200, "no key needed without --api-key")
    p2.send_signal(signal.SIGTERM)
    p2.wait(timeout=30)
    w = subprocess.run([CLI, "serve", "-m", MODEL, "--host", "0.0.0.0", "--port", "99999"], capture_output=True,
                       text=True)
    check(w.returncode == 2, "a bad port is a usage error")

    # ---- a streamed request waiting in the queue gets keep-alive comments, and when its
    # client goes away it leaves the queue at once (not when a slot frees), never evaluated
    p3, port3 = start("--parallel", "1", "--ctx-size", "4096", "--sse-keepalive", "20")
    try:
        long_run = threading.Thread(target=lambda: sse(port3, "/v1/completions", dict(
            prompt=PROMPTS[0], max_tokens=4000, temperature=0, stream=True)))
        long_run.start()
        deadline = time.time() + 10
        while time.time() < deadline and request(port3, "GET", "/health")[1]["slots_busy"] != 1:
            time.sleep(0.01)
        s, m0, _ = request(port3, "GET", "/metrics")
        c = http.client.HTTPConnection("127.0.0.1", port3, timeout=30)
        c.request("POST", "/v1/completions", body=json.dumps(dict(
            prompt=PROMPTS[1], max_tokens=8, temperature=0, stream=True)).encode(),
            headers={"Content-Type": "application/json"})
        r = c.getresponse()
        first = r.readline()
        s, o, _ = request(port3, "GET", "/health")
        check(r.status == 200 and first == b": keep-alive\n", "a queued stream gets a keep-alive comment: %r" % first)
        check(o["slots_busy"] == 1 and o["queue_length"] == 1, "the second request waits: %s" % o)
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            s, o, _ = request(port3, "GET", "/health")
            if o["queue_length"] == 0:
                break
            time.sleep(0.01)
        check(o["queue_length"] == 0 and o["slots_busy"] == 1,
              "the gone client's request left the queue while the first still ran: %s" % o)
        long_run.join()
        s, m1, _ = request(port3, "GET", "/metrics")
        check("wgml_requests_cancelled_total 1" in m1, "the cancel is counted")
        prompt_tokens = lambda m: int(next(l for l in m.splitlines() if l.startswith("wgml_prompt_tokens_total")).split()[-1])
        check(prompt_tokens(m1) == prompt_tokens(m0), "the cancelled request's prompt was never evaluated: %d -> %d"
              % (prompt_tokens(m0), prompt_tokens(m1)))
    finally:
        stop_server(p3)


def hostile():
    """Hostile clients (docs/serve.md, Security): idle, slow and too many connections, a foreign Host or Origin,
    bodies a web page could send without a preflight, ambiguous framing, a huge message while a stream runs, and a
    non-streamed request whose client left. Each limit is shown holding, not only that nothing crashed."""
    def metric(port, name):
        s, m, _ = request(port, "GET", "/metrics", key=None)
        for line in m.splitlines():
            if not line.startswith("#") and line.rsplit(" ", 1)[0] == name:
                return float(line.rsplit(" ", 1)[1])
        return None

    def closed_within(sock, seconds):
        """Whether the server closes sock (an end of stream) within seconds; it sends nothing first."""
        sock.settimeout(seconds)
        try:
            return sock.recv(4096) == b""
        except (socket.timeout, TimeoutError):
            return False
        except ConnectionResetError:
            return True

    def health_ms(port):
        t = time.time()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            status = r.status
        except OSError as e:  # (a time-out included: the server is locked out)
            status = repr(e)
        c.close()
        return status, (time.time() - t) * 1e3

    # ---- idle sockets cannot lock anyone out: one address holds at most --max-client-connections (a new one
    # closes its oldest idle one), and idle ones never take the last workers (1 + 2 + 32 + 8 = 43 here)
    p, port = start("--parallel", "1", "--queue", "2")
    try:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(64)]
        time.sleep(0.5)
        status, ms = health_ms(port)
        check(status == 200 and ms < 500, "/health with 64 idle sockets open: %s in %.0f ms" % (status, ms))
        closed = sum(closed_within(s, 0.05) for s in idle)
        check(closed >= 64 - 32, "64 idle sockets from one address: %d closed by the server (limit 32)" % closed)
        check(metric(port, 'wgml_http_connections_closed_total{reason="evicted"}') >= 32, "evictions counted")
        for s in idle:
            s.close()
        # from four addresses (127.0.0.2-5: all loopback), 25 each: 100 idle sockets, more than the workers
        many = [socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.%d" % (2 + i % 4), 0))
                for i in range(100)]
        time.sleep(0.5)
        status, ms = health_ms(port)
        check(status == 200 and ms < 500, "/health with 100 idle sockets from 4 addresses: %s in %.0f ms" % (status, ms))
        ok = completion(port, PROMPTS[0], 4)
        check(len(ok["choices"][0]["text"]) > 0, "a completion still runs")
        for s in many:
            s.close()
    finally:
        stop_server(p)

    # ---- time limits: a request head and a body must arrive within --timeout, a kept-alive connection with no
    # request is closed after --idle-timeout
    p, port = start("--timeout", "2", "--idle-timeout", "1")
    try:
        t = time.time()
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /health HTTP/1.1\r\n")
        # a slow head: a byte every 0.25 s does not keep it open past the limit
        gone = False
        for _ in range(40):
            try:
                s.sendall(b"X")
            except OSError:
                gone = True
                break
            if closed_within(s, 0.25):
                gone = True
                break
        el = time.time() - t
        check(gone and 1.5 < el < 4, "a head trickling in is cut at --timeout 2: after %.1f s (closed %s)" % (el, gone))
        s.close()
        # a body: the head in time, the body a byte every 0.25 s: 408 after the limit
        s = socket.create_connection(("127.0.0.1", port))
        t = time.time()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 200\r\n\r\n{\"prompt\": \"" % port)
        answer = b""
        s.settimeout(0.25)
        while time.time() - t < 8 and b"\r\n\r\n" not in answer:
            try:
                s.sendall(b"a")
                answer += s.recv(4096)
            except (socket.timeout, TimeoutError):
                pass
            except OSError:
                break
        el = time.time() - t
        check(answer.startswith(b"HTTP/1.1 408") and 1.5 < el < 4, "a slow body: %r after %.1f s" % (answer[:40], el))
        s.close()
        check(metric(port, 'wgml_http_connections_closed_total{reason="body_timeout"}') == 1, "the late body is counted")
        # keep-alive: one request, then silence: closed after about a second
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/health")
        c.getresponse().read()
        t = time.time()
        check(closed_within(c.sock, 5) and 0.5 < time.time() - t < 3,
              "an idle kept-alive connection is closed after --idle-timeout 1: %.1f s" % (time.time() - t))
        c.close()
    finally:
        stop_server(p)

    # ---- browsers cannot be turned against a server without a key: Host, Origin, content type, no CORS
    p, port = start()
    try:
        def req(method, path, headers, body=None):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.putrequest(method, path, skip_host="Host" in headers)
            for k, v in headers.items():
                c.putheader(k, v)
            if body is not None:
                c.putheader("Content-Length", str(len(body)))
            c.endheaders(body)
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data
        for host, want in [("attacker.example:%d" % port, 403), ("localhost:%d" % port, 200),
                           ("127.0.0.1:%d" % port, 200), ("[::1]:%d" % port, 200), ("127.0.0.1", 403),
                           ("localhost:1", 403), ("127.0.0.1.nip.io:%d" % port, 403)]:
            s, h, d = req("GET", "/health", {"Host": host})
            check(s == want, "Host %s -> %d (wanted %d)" % (host, s, want))
        raw = raw_request(port, b"GET /health HTTP/1.0\r\n\r\n")
        check(raw.startswith(b"HTTP/1.0 200") or raw.startswith(b"HTTP/1.1 200"), "no Host (HTTP/1.0): %r" % raw[:30])
        s, h, d = req("OPTIONS", "/v1/completions", {"Origin": "https://evil.example",
                                                     "Access-Control-Request-Method": "POST"})
        check(s == 403 and not any(k.startswith("access-control-") for k in h), "a foreign preflight: %d %s" % (s, h))
        before = metric(port, "wgml_prompt_tokens_total")
        body = json.dumps(dict(prompt="Once upon a time", max_tokens=4)).encode()
        s, h, d = req("POST", "/v1/completions", {"Content-Type": "text/plain"}, body)
        check(s == 415 and json.loads(d)["error"]["code"] == "unsupported_media_type", "text/plain POST: %d" % s)
        s, h, d = req("POST", "/v1/completions", {"Content-Type": "application/x-www-form-urlencoded"}, body)
        check(s == 415, "a form POST: %d" % s)
        s, h, d = req("POST", "/v1/completions", {}, body)
        check(s == 415, "a POST without a content type: %d" % s)
        s, h, d = req("POST", "/v1/completions", {"Content-Type": "application/json", "Origin": "https://evil.example"},
                      body)
        check(s == 403 and "access-control-allow-origin" not in h, "a foreign Origin's POST: %d" % s)
        check(metric(port, "wgml_prompt_tokens_total") == before, "none of them generated")
        s, h, d = req("POST", "/v1/completions", {"Content-Type": "Application/JSON; charset=utf-8"}, body)
        check(s == 200 and "access-control-allow-origin" not in h, "JSON with a charset: %d %s" % (s, h))
        # two framings of one body: refused, and the connection closed
        raw = raw_request(port, b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json"
                          b"\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % port)
        check(raw.startswith(b"HTTP/1.1 400") and b"Content-Length and Transfer-Encoding" in raw and
              raw.count(b"HTTP/1.1") == 1, "Content-Length with Transfer-Encoding: %r" % raw[:60])
        s, o, _ = request(port, "POST", "/v1/completions", dict(prompt="x", max_tokens=(1 << 24) + 1), key=None)
        check(s == 400 and "16777216" in o["error"]["message"], "max_tokens past the limit names it: %s" % o)

        # ---- a message with 60,000 keys while a stream runs: the stream never stands still
        gaps, done = [], threading.Event()

        def stream():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("POST", "/v1/completions", body=json.dumps(dict(prompt=PROMPTS[0], max_tokens=230, temperature=0,
                                                                     stream=True)).encode(),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            last = None
            while True:
                line = r.readline()
                if not line:
                    break
                if line.startswith(b"data: "):
                    now = time.time()
                    if last is not None and not done.is_set():
                        gaps.append(now - last)
                    last = now
            c.close()
        t = threading.Thread(target=stream)
        t.start()
        time.sleep(0.3)
        msg = {"role": "user", "content": "Tell me a story."}
        msg.update(("k%d" % i, i) for i in range(60000))
        t0 = time.time()
        s, o, _ = request(port, "POST", "/v1/chat/completions", dict(messages=[msg], max_tokens=2), key=None)
        el = time.time() - t0
        done.set()
        t.join()
        check(s == 200 and el < 3, "the 60,000-key message is answered: %s in %.2f s (a dict's hash index: it took "
              "7 s when every key was a linear scan)" % (s, el))
        check(gaps and max(gaps) < 0.5, "the stream's largest gap while it rendered: %.3f s (%d events; the request "
              "took %.2f s)" % (max(gaps) if gaps else -1, len(gaps), el))
        print("60,000-key message: %.2f s; the stream's largest gap meanwhile %.3f s" % (el, max(gaps) if gaps else -1))
    finally:
        stop_server(p)

    # ---- --cors: the origins given may call it (preflight answered, the header on responses); "*" needs a key
    p, port = start("--cors", "http://app.example:3000", "--api-key", KEY)
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("OPTIONS", "/v1/chat/completions", headers={"Origin": "http://app.example:3000",
                                                                "Access-Control-Request-Method": "POST",
                                                                "Access-Control-Request-Headers": "authorization,content-type"})
        r = c.getresponse()
        r.read()
        h = dict((k.lower(), v) for k, v in r.getheaders())
        check(r.status == 204 and h.get("access-control-allow-origin") == "http://app.example:3000" and
              "POST" in h.get("access-control-allow-methods", "") and
              "authorization" in h.get("access-control-allow-headers", "").lower(), "an allowed preflight: %s %s"
              % (r.status, h))
        c.request("GET", "/v1/models", headers={"Origin": "http://app.example:3000", "Authorization": "bearer " + KEY})
        r = c.getresponse()
        r.read()
        check(r.status == 200 and r.getheader("Access-Control-Allow-Origin") == "http://app.example:3000",
              "an allowed origin's request (and 'bearer' in lower case): %s %s" % (r.status, r.getheaders()))
        c.request("GET", "/v1/models", headers={"Origin": "http://other.example", "Authorization": "Bearer " + KEY})
        r = c.getresponse()
        r.read()
        check(r.status == 403, "another origin: %s" % r.status)
        c.close()
        # with a key, Host is not checked (a proxy in front may use any name)
        s, o, _ = request(port, "GET", "/v1/models", headers={"Host": "wgml.internal"})
        check(s == 200, "a keyed server takes any Host: %s" % s)
    finally:
        stop_server(p)
    w = subprocess.run([CLI, "serve", "-m", MODEL, "--cors", "*", "--port", "0"], capture_output=True, text=True)
    check(w.returncode == 2 and "--api-key" in w.stderr, "--cors * without a key: %s %s" % (w.returncode, w.stderr))

    # ---- a non-streamed request whose client leaves is cancelled and frees its slot
    p, port = start("--parallel", "1", "--ctx-size", "4096")
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", "/v1/completions", body=json.dumps(dict(prompt=PROMPTS[0], max_tokens=4000,
                                                                  temperature=0)).encode(),
                  headers={"Content-Type": "application/json"})
        deadline = time.time() + 10
        while time.time() < deadline and request(port, "GET", "/health", key=None)[1]["slots_busy"] != 1:
            time.sleep(0.01)
        c.sock.close()
        t = time.time()
        while time.time() - t < 5 and request(port, "GET", "/health", key=None)[1]["slots_busy"] != 0:
            time.sleep(0.02)
        el = time.time() - t
        s, o, _ = request(port, "GET", "/health", key=None)
        check(o["slots_busy"] == 0 and el < 1, "a gone non-streamed client's slot is freed in %.2f s: %s" % (el, o))
        check(metric(port, "wgml_requests_cancelled_total") == 1, "the cancel is counted")
        check(metric(port, "wgml_generated_tokens_total") < 3900, "it did not run to its end")
    finally:
        stop_server(p)


def speech():
    """A speech model serves /v1/audio/speech: a streamed WAV equal to `wgml speak -o -`'s (sizes 0xFFFFFFFF, as
    OpenAI streams them) and streamed PCM equal to its samples."""
    kdir = os.path.join(os.environ.get("WGML_SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "shared")),
                        "kokoro")
    if not os.path.exists(os.path.join(kdir, "kokoro-tiny.pth")):
        check(not os.environ.get("WGML_REQUIRE_SHARED"), "the shared Kokoro checkpoint is missing")
        print("speech: skipped (no ../shared/kokoro)")
        return
    phonemes = "həlˈoʊ wˈɜːld. hˌaʊ ɑːɹ juː?"
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "kokoro.gguf")
        subprocess.run([CLI, "convert", "kokoro", os.path.join(kdir, "kokoro-tiny.pth"), "--config",
                        os.path.join(kdir, "config-kokoro-tiny.json"), "--voices", os.path.join(kdir, "voices"),
                        "-o", model], check=True, capture_output=True)
        want = subprocess.run([CLI, "speak", "-m", model, "--backend", "cpu", "--threads", "1", "--phonemes", phonemes,
                               "-v", "af_heart:0.6,am_adam:0.4", "--seed", "5", "-o", "-"], check=True,
                              capture_output=True).stdout
        check(want[4:8] == b"\xff\xff\xff\xff" and want[40:44] == b"\xff\xff\xff\xff" and len(want) > 1000,
              "`wgml speak -o -` writes a WAV of unknown length")
        p, port = serve(model, "--threads", "1")
        try:
            body = dict(model="kokoro", input=phonemes, voice="af_heart:0.6,am_adam:0.4", seed=5, phonemes=True)
            status, r, got = post_bytes(port, "/v1/audio/speech", body)
            check(status == 200 and r.getheader("Content-Type") == "audio/wav" and
                  r.getheader("Transfer-Encoding") == "chunked", "speech: %s %s" % (status, r.getheader("Content-Type")))
            check(got == want, "the streamed WAV equals `wgml speak -o -`'s (%d vs %d bytes)" % (len(got), len(want)))
            status, r, pcm = post_bytes(port, "/v1/audio/speech", dict(body, response_format="pcm"))
            check(r.getheader("Content-Type") == "audio/pcm" and r.getheader("Transfer-Encoding") == "chunked" and
                  pcm == want[44:], "PCM: the WAV's samples, streamed (%d bytes)" % len(pcm))
            s, o, _ = request(port, "GET", "/v1/models", key=None)
            m = o["data"][0]
            check(m["meta"]["capabilities"] == ["audio.speech"] and m["voices"] == ["af_heart", "am_adam", "bf_emma"],
                  "models: %s" % m)
            for extra, param in [(dict(voice="alloy"), "voice"), (dict(voice="../voices/af_heart.bin"), "voice"),
                                 (dict(voice="af_heart,nobody"), "voice"), (dict(response_format="mp3"), "response_format"),
                                 (dict(speed=9), "speed"), (dict(input=""), "input"), (dict(seed=-1), "seed"),
                                 (dict(input="hi\u0000"), "input"), (dict(voice="af_heart\u0000x"), "voice"),
                                 (dict(lang="fr"), "lang")]:
                s, o, _ = request(port, "POST", "/v1/audio/speech", dict(body, **extra), key=None)
                check(s == 400 and o["error"]["param"] == param, "speech %s -> %s %s" % (extra, s, o))
            s, o, _ = request(port, "POST", "/v1/embeddings", dict(input="hi"), key=None)
            check(s == 400 and o["error"]["code"] == "model_not_supported", "embeddings on kokoro: %s %s" % (s, o))
        finally:
            stop_server(p)
        # a client that never reads its (long) audio does not hold up the next speech request: the model's lock
        # covers the synthesis only, not the writes to the client (with --timeout 300, a blocked write would hold
        # it past the client's patience)
        p, port = serve(model, "--threads", "1", "--timeout", "300")
        try:
            slow = socket.socket()
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            slow.connect(("127.0.0.1", port))
            long_body = json.dumps(dict(input=(phonemes + " ") * 8, voice="af_heart", phonemes=True, speed=0.25,
                                        response_format="pcm")).encode()
            slow.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (port, len(long_body), long_body))
            time.sleep(1)
            t = time.time()
            try:
                status, r, wav = post_bytes(port, "/v1/audio/speech", dict(input="hˈaɪ.", voice="af_heart",
                                                                           phonemes=True))
            except OSError as e:  # the client's 120 s ran out
                status, wav = repr(e), b""
            el = time.time() - t
            # then the stalled client reads its audio: all of it is there (it was made while nobody read)
            pending, tail = 0, b""
            slow.settimeout(60)
            while not tail.endswith(b"0\r\n\r\n"):
                b = slow.recv(1 << 20)
                if not b:
                    break
                pending += len(b)
                tail = (tail + b)[-16:]
            check(status == 200 and wav[:4] == b"RIFF" and pending > 1 << 20,
                  "speech beside a client that does not read: %s after %.1f s, %d bytes stalled" % (status, el, pending))
            print("speech beside a stalled reader: answered in %.1f s (the stalled stream had %d bytes waiting)"
                  % (el, pending))
            slow.close()
        finally:
            stop_server(p)
        # the G2P child: one that hangs fails its request after the time limit (5 s + 1 s per KB) and the server
        # goes on; one that records its environment never sees the server's API key
        hang, record, envfile = (os.path.join(d, n) for n in ("hang.sh", "record.sh", "env.txt"))
        with open(hang, "w") as f:
            f.write("#!/bin/sh\nexec sleep 1000\n")
        with open(record, "w") as f:
            f.write("#!/bin/sh\nenv > '%s'\nexec espeak-ng \"$@\"\n" % envfile)
        os.chmod(hang, 0o755)
        os.chmod(record, 0o755)
        p, port = serve(model, "--threads", "1", env=dict(os.environ, WGML_ESPEAK=hang, WGML_API_KEY=KEY))
        try:
            t = time.time()
            s, o, _ = request(port, "POST", "/v1/audio/speech", dict(input="Hello there.", voice="af_heart"))
            el = time.time() - t
            check(s == 500 and "no answer within 5.0 s" in o["error"]["message"] and 4.5 < el < 9,
                  "a hung espeak-ng: %s after %.1f s: %s" % (s, el, o))
            status, r, wav = post_bytes(port, "/v1/audio/speech", dict(input="hˈaɪ.", voice="af_heart", phonemes=True))
            check(status == 401, "the server goes on (a request without its key: %s)" % status)
            s, o, _ = request(port, "GET", "/health")
            check(s == 200, "health after a hung espeak-ng: %s" % s)
        finally:
            stop_server(p)
        if shutil.which("espeak-ng"):
            p, port = serve(model, "--threads", "1", env=dict(os.environ, WGML_ESPEAK=record, WGML_API_KEY=KEY,
                                                             WGML_TEST_SECRET="x"))
            try:
                s, r, wav = post_bytes(port, "/v1/audio/speech", dict(input="Hello there.", voice="af_heart"), key=KEY)
                seen = open(envfile).read() if os.path.exists(envfile) else ""
                check(s == 200 and wav[:4] == b"RIFF" and "PATH=" in seen and KEY not in seen and "WGML_TEST_SECRET" not in seen,
                      "espeak-ng's environment: %s, %r" % (s, seen[:300]))
            finally:
                stop_server(p)


def wav_bytes(seconds=1.0, rate=44100, channels=2, freq=440.0):
    """A 16-bit PCM WAV (Python's wave module): a sine on the first channel, silence on the others."""
    import io
    import math
    import wave
    b = io.BytesIO()
    w = wave.open(b, "wb")
    w.setnchannels(channels)
    w.setsampwidth(2)
    w.setframerate(rate)
    frames = bytearray()
    for i in range(int(seconds * rate)):
        frames += struct.pack("<h", int(12000 * math.sin(2 * math.pi * freq * i / rate)))
        frames += b"\0\0" * (channels - 1)
    w.writeframes(bytes(frames))
    w.close()
    return b.getvalue()


def multipart(fields, files=(), boundary="wgml-test-boundary-7d3f"):
    """A multipart/form-data body (RFC 7578): fields [(name, value)], files [(name, filename, bytes)]."""
    out = b""
    for name, value in fields:
        out += b"--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % (
            boundary.encode(), name.encode(), value.encode() if isinstance(value, str) else value)
    for name, filename, data in files:
        out += (b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\nContent-Type: audio/wav"
                b"\r\n\r\n" % (boundary.encode(), name.encode(), filename.encode())) + data + b"\r\n"
    return out + b"--%s--\r\n" % boundary.encode(), "multipart/form-data; boundary=" + boundary


def upload(port, path, body, content_type, key=None):
    """POST a body as it is: status, parsed JSON (or the text), the response."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = {"Content-Type": content_type}
    if key:
        h["Authorization"] = "Bearer " + key
    c.request("POST", path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        return r.status, json.loads(data), r, data
    except ValueError:
        return r.status, data.decode("utf-8", "replace"), r, data


def transcription():
    """A Whisper model (`wgml synth --arch whisper-micro`: random weights, made-up syllables, exact token ids)
    serves /v1/audio/transcriptions and /v1/audio/translations: every response_format, a stream of
    transcript.text.delta events adding up to transcript.text.done's text, the same segments as `wgml transcribe`,
    and each bad upload its 4xx. Every request asks for max_tokens 8 and no_fallback (wgml's extensions): random
    weights would otherwise decode 224 tokens six times over."""
    audio = wav_bytes()
    quick = [("model", "whisper-1"), ("max_tokens", "8"), ("no_fallback", "true")]
    with tempfile.TemporaryDirectory() as d:
        model, wav = os.path.join(d, "whisper-micro.gguf"), os.path.join(d, "a.wav")
        subprocess.run([CLI, "synth", "--arch", "whisper-micro", "--type", "F16", "-o", model], check=True,
                       capture_output=True)
        with open(wav, "wb") as f:
            f.write(audio)
        want = json.loads(subprocess.run([CLI, "transcribe", "-m", model, "--backend", "cpu", "--max-tokens", "8",
                                          "--no-fallback", "-f", "verbose_json", wav], check=True,
                                         capture_output=True).stdout)
        p, port = serve(model, "--max-upload", "200000")
        try:
            def tr(fields, files=None, path="/v1/audio/transcriptions"):
                body, ct = multipart(quick + fields, [("file", "a.wav", audio)] if files is None else files)
                return upload(port, path, body, ct)
            s, o, r, _ = tr([("response_format", "verbose_json")])
            check(s == 200 and r.getheader("Content-Type") == "application/json" and o["task"] == "transcribe" and
                  set(o) == {"task", "language", "duration", "text", "segments", "usage"} and o["duration"] == 1.0,
                  "verbose_json: %s %s" % (s, o))
            seg_keys = {"id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob", "compression_ratio",
                        "no_speech_prob"}
            check(s == 200 and len(o["segments"]) >= 1 and all(set(g) == seg_keys for g in o["segments"]) and
                  [g["id"] for g in o["segments"]] == list(range(len(o["segments"]))), "segments: %s" % o)
            check(s == 200 and o["segments"] == want["segments"] and o["text"] == want["text"] and
                  o["language"] == want["language"], "the server's verbose_json equals `wgml transcribe`'s: %s vs %s"
                  % (o, want))
            text = o["text"] if s == 200 else None
            check(text == "".join(g["text"] for g in want["segments"]).strip(), "text = the segments' texts joined")
            s, o, r, _ = tr([])
            check(s == 200 and o == {"text": text, "usage": {"type": "duration", "seconds": 1}}, "json: %s %s" % (s, o))
            s, o, r, _ = tr([("response_format", "text")])
            check(s == 200 and r.getheader("Content-Type").startswith("text/plain") and o == text + "\n",
                  "text: %s %r" % (s, o))
            for fmt in ("srt", "vtt"):
                s, o, r, _ = tr([("response_format", fmt)])
                cli = subprocess.run([CLI, "transcribe", "-m", model, "--backend", "cpu", "--max-tokens", "8",
                                      "--no-fallback", "-f", fmt, wav], check=True, capture_output=True, text=True).stdout
                check(s == 200 and o == cli and (o.startswith("WEBVTT\n\n") if fmt == "vtt" else o.startswith("1\n00:")),
                      "%s: %s %r (the CLI's: %r)" % (fmt, s, o, cli))
            # a stream: deltas as segments come, then the whole text
            body, ct = multipart(quick + [("stream", "true")], [("file", "a.wav", audio)])
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("POST", "/v1/audio/transcriptions", body=body, headers={"Content-Type": ct})
            r = c.getresponse()
            raw = r.read().decode()
            c.close()
            events = [json.loads(e[6:]) for e in raw.split("\n\n") if e.startswith("data: ")]
            check(r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream") and
                  raw.endswith("\n\n") and len(events) >= 2 and
                  all(e["type"] == "transcript.text.delta" and set(e) == {"type", "delta"} for e in events[:-1]) and
                  events[-1] == {"type": "transcript.text.done", "text": text} and
                  "".join(e["delta"] for e in events[:-1]).strip() == text, "stream: %s %r" % (r.status, raw[:400]))
            # translations (this multilingual model translates into English), and a language given
            s, o, r, _ = tr([("response_format", "verbose_json")], path="/v1/audio/translations")
            check(s == 200 and o["task"] == "translate" and o["language"] == "english" and len(o["segments"]) >= 1,
                  "translations: %s %s" % (s, o))
            s, o, r, _ = tr([("language", "de"), ("response_format", "verbose_json")])
            check(s == 200 and o["language"] == "german", "language de: %s %s" % (s, str(o)[:200]))
            s, o, r, _ = tr([("temperature", "0.5"), ("timestamp_granularities[]", "segment"), ("prompt", "Hello.")])
            check(s == 200 and isinstance(o.get("text"), str), "temperature, segment granularity, prompt: %s %s" % (s, o))
            # word timestamps: "words" ({word, start, end}); "segments" only when asked for too
            vj = [("response_format", "verbose_json")]
            s, o, r, _ = tr(vj + [("timestamp_granularities[]", "word")])
            check(s == 200 and isinstance(o.get("words"), list) and "segments" not in o and
                  all(set(w) == {"word", "start", "end"} and w["start"] <= w["end"] for w in o["words"]),
                  "word granularity: %s %s" % (s, str(o)[:300]))
            s, o2, r, _ = tr(vj + [("timestamp_granularities[]", "word"), ("timestamp_granularities[]", "segment")])
            check(s == 200 and o2.get("words") == o.get("words") and len(o2.get("segments", [])) >= 1 and
                  sum(len(g.get("words", [])) for g in o2["segments"]) == len(o2["words"]),
                  "word and segment granularity: %s %s" % (s, str(o2)[:300]))
            # a 16 kHz mono file of another format (libsndfile: FLAC needs no encoder here, so a float WAV)
            mono = wav_bytes(0.5, 16000, 1)
            s, o, r, _ = tr([], [("file", "mono.wav", mono)])
            check(s == 200 and o["usage"]["seconds"] == 1, "16 kHz mono: %s %s" % (s, o))

            # ---- errors: each a 4xx naming the problem
            def err(status, fields, files=None, param=None, words=None, raw=None, ct=None,
                    path="/v1/audio/transcriptions"):
                if raw is None:
                    s, o, r, _ = tr(fields, files, path)
                else:
                    s, o, r, _ = upload(port, path, raw, ct)
                ok = s == status and isinstance(o, dict) and set(o.get("error", {})) == {"message", "type", "param", "code"}
                if ok and param is not None:
                    ok = o["error"]["param"] == param
                if ok and words:
                    ok = words in o["error"]["message"]
                check(ok, "transcription error %s %s -> %s %s (wanted %d)" % (fields, str(raw)[:40], s, o, status))
            err(400, [], [], param="file", words="'file' is required")
            err(400, [], [("file", "a.wav", mono), ("file", "b.wav", mono)], param="file", words="twice")
            err(400, [], [("file", "notes.txt", b"hello, this is text and not audio\n" * 4)], param="file",
                words="is not audio")
            err(400, [], [("file", "cut.wav", audio[:len(audio) // 3])], param="file", words="truncated")
            err(400, [], [("file", "head.wav", audio[:30])], param="file")
            err(400, [], [("file", "empty.wav", b"")], param="file")
            err(400, [], [("file", "zero.wav", wav_bytes(0, 16000, 1))], param="file", words="no audio")
            err(400, [("response_format", "mp3")], param="response_format")
            err(400, [("response_format", "verbose_json"), ("stream", "true")], param="stream")
            err(400, [("stream", "maybe")], param="stream")
            err(400, [("temperature", "2")], param="temperature")
            err(400, [("temperature", "x")], param="temperature")
            err(400, [("language", "klingon")], param="language")
            err(400, [("timestamp_granularities[]", "word")], param="timestamp_granularities[]",
                words="verbose_json")
            err(400, [("response_format", "verbose_json"), ("timestamp_granularities[]", "letter")],
                param="timestamp_granularities[]")
            err(400, [("max_tokens", "0")], param="max_tokens")
            err(400, [("prompt", "a\u0000b")], param="prompt")
            err(400, [("prompt", b"\xff\xfe")], param="prompt")
            err(413, [], [("file", "big.wav", wav_bytes(3, 44100, 2))])  # over --max-upload 200000
            body, ct = multipart(quick, [("file", "a.wav", audio)])
            err(400, None, raw=body[:-40], ct=ct, words="malformed")  # no closing boundary
            err(400, None, raw=body.replace(b"\r\n", b"\n"), ct=ct, words="malformed")  # LF line ends
            err(400, None, raw=b"--x\r\n" + b"X-Junk: 1\r\n" * 2000 + b"\r\n", ct="multipart/form-data; boundary=x",
                words="malformed")
            err(400, None, raw=b"--x\r\nContent-Disposition: attachment\r\n\r\nab\r\n--x--\r\n",
                ct="multipart/form-data; boundary=x", words="form-data")
            err(400, None, raw=b"".join(b"--x\r\nContent-Disposition: form-data; name=\"f%d\"\r\n\r\nv\r\n" % i
                                        for i in range(100)) + b"--x--\r\n", ct="multipart/form-data; boundary=x",
                words="more than 64 parts")
            err(415, None, raw=b'{"file": "a.wav"}', ct="application/json")
            err(415, None, raw=body, ct="multipart/form-data")  # no boundary
            s, o, _ = request(port, "GET", "/v1/models", key=None)
            check(o["data"][0]["meta"]["capabilities"] == ["audio.transcriptions", "audio.translations"],
                  "capabilities: %s" % o)
            s, o, _ = request(port, "POST", "/v1/chat/completions", dict(messages=[dict(role="user", content="hi")]),
                              key=None)
            check(s == 400 and o["error"]["code"] == "model_not_supported", "chat on a Whisper model: %s %s" % (s, o))
            s, m, _ = request(port, "GET", "/metrics", key=None)
            check('wgml_requests_total{endpoint="audio_transcriptions",status="200"}' in m and
                  'wgml_requests_total{endpoint="audio_translations",status="200"} 1' in m, "metrics count them")
            s, o, _ = request(port, "GET", "/health", key=None)
            check(s == 200, "health after the uploads: %s" % s)
        finally:
            stop_server(p)
        # admission: with --queue 0 one upload at a time is in the server, counted from its head (before its body
        # is read): one whose body is still coming holds the place, the next gets 503 at once, and once the first
        # body is in, it is answered and the place is free again
        p, port = serve(model, "--queue", "0")
        try:
            body, ct = multipart(quick, [("file", "a.wav", audio)])
            slow = socket.create_connection(("127.0.0.1", port), timeout=60)
            slow.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: %s\r\n"
                         b"Content-Length: %d\r\n\r\n" % (port, ct.encode(), len(body)) + body[:1000])
            time.sleep(0.5)
            s, o, r, _ = upload(port, "/v1/audio/transcriptions", body, ct)
            check(s == 503 and o["error"]["type"] == "overloaded_error", "a second upload while one is in: %s %s" % (s, o))
            slow.sendall(body[1000:])
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                b = slow.recv(65536)
                if not b:
                    break
                answer += b
            slow.close()
            check(answer.startswith(b"HTTP/1.1 200") and json.loads(answer.partition(b"\r\n\r\n")[2])["text"] == text,
                  "the first upload, its body completed: %r" % answer[:200])
            s, o, r, _ = upload(port, "/v1/audio/transcriptions", body, ct)
            check(s == 200 and o["text"] == text, "the place is free again: %s %s" % (s, o))
        finally:
            stop_server(p)
        # --max-audio: longer audio is a 400 naming the limit, before any decoding
        p, port = serve(model, "--max-audio", "1")
        try:
            body, ct = multipart(quick, [("file", "a.wav", wav_bytes(2.5, 16000, 1))])
            s, o, r, _ = upload(port, "/v1/audio/transcriptions", body, ct)
            check(s == 400 and o["error"]["param"] == "file" and "limit" in o["error"]["message"],
                  "audio over --max-audio: %s %s" % (s, o))
        finally:
            stop_server(p)
    # a model that does not transcribe: 400 model_not_supported
    p, port = start()
    try:
        body, ct = multipart(quick, [("file", "a.wav", audio)])
        s, o, r, _ = upload(port, "/v1/audio/transcriptions", body, ct)
        check(s == 400 and o["error"]["code"] == "model_not_supported" and "transcribe" in o["error"]["message"],
              "transcriptions on a llama model: %s %s" % (s, o))
    finally:
        stop_server(p)


def several_models():
    """-m four times: an LLM, an embedding model, Kokoro and Whisper in one process, each endpoint on its model."""
    kdir = os.path.join(os.environ.get("WGML_SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "shared")),
                        "kokoro")
    if not os.path.exists(os.path.join(kdir, "kokoro-tiny.pth")):
        return  # speech() has said why
    with tempfile.TemporaryDirectory() as d:
        emb, tts, asr = os.path.join(d, "minilm.gguf"), os.path.join(d, "kokoro.gguf"), os.path.join(d, "whisper.gguf")
        subprocess.run([CLI, "synth", "--arch", "all-minilm-l6", "--type", "F16", "--layers", "1", "-o", emb],
                       check=True, capture_output=True)
        subprocess.run([CLI, "synth", "--arch", "whisper-micro", "--type", "F16", "-o", asr], check=True,
                       capture_output=True)
        subprocess.run([CLI, "convert", "kokoro", os.path.join(kdir, "kokoro-tiny.pth"), "--config",
                        os.path.join(kdir, "config-kokoro-tiny.json"), "--voices", os.path.join(kdir, "voices"),
                        "-o", tts], check=True, capture_output=True)
        want_vec = [float(x) for x in subprocess.run([CLI, "embed", "-m", emb, "--backend", "cpu", "a cat"], check=True,
                                                     capture_output=True, text=True).stdout.split()]
        p, port = serve(tts, "-m", emb, "-m", asr, "-m", MODEL, "--threads", "1")
        try:
            s, o, _ = request(port, "GET", "/v1/models", key=None)
            caps = {m["id"]: m["meta"]["capabilities"] for m in o["data"]}
            check(caps == {"stories260K.gguf": ["completions", "chat.completions"], "minilm.gguf": ["embeddings"],
                           "kokoro.gguf": ["audio.speech"],
                           "whisper.gguf": ["audio.transcriptions", "audio.translations"]}, "four models: %s" % caps)
            check(o["data"][0]["id"] == "stories260K.gguf", "the LLM is the main model: %s" % o["data"][0]["id"])
            solo = completion(port, PROMPTS[0])["choices"][0]["text"]
            check(len(solo) > 0, "completions on the LLM")
            s, o, _ = request(port, "POST", "/v1/embeddings", dict(input="a cat"), key=None)
            got = o["data"][0]["embedding"] if s == 200 else []
            check(s == 200 and o["model"] == "minilm.gguf" and len(got) == len(want_vec) and
                  max(abs(a - b) for a, b in zip(got, want_vec)) <= 1e-6, "embeddings on the embedding model: %s" % s)
            status, r, wav = post_bytes(port, "/v1/audio/speech", dict(input="hˈaɪ.", voice="af_heart", phonemes=True))
            check(status == 200 and wav[:4] == b"RIFF" and len(wav) > 1000, "speech on Kokoro: %s %d bytes" % (status, len(wav)))
            body, ct = multipart([("max_tokens", "4"), ("no_fallback", "true")], [("file", "a.wav", wav_bytes(0.5))])
            s, o, r, _ = upload(port, "/v1/audio/transcriptions", body, ct)
            check(s == 200 and isinstance(o.get("text"), str), "transcription on Whisper: %s %s" % (s, o))
        finally:
            stop_server(p)
        # two models for one task: refused, naming the file
        w = subprocess.run([CLI, "serve", "-m", MODEL, "-m", MODEL, "--port", "0"], capture_output=True, text=True)
        check(w.returncode == 1 and "a second model for the same task" in w.stderr, "two LLMs: %s %s" % (w.returncode, w.stderr))


def embeddings():
    """An embedding model serves /v1/embeddings (floats and base64) as `wgml embed` computes them."""
    texts = ["The cat sat on the mat.", "A quick brown fox", "hello"]
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "minilm.gguf")
        subprocess.run([CLI, "synth", "--arch", "all-minilm-l6", "--type", "F16", "--layers", "1", "-o", model],
                       check=True, capture_output=True)
        want = [[float(x) for x in line.split()] for line in subprocess.run(
            [CLI, "embed", "-m", model, "--backend", "cpu", *texts], check=True, capture_output=True,
            text=True).stdout.strip().splitlines()]
        p, port = serve(model)
        try:
            s, o, _ = request(port, "POST", "/v1/embeddings", dict(input=texts, model="x"), key=None)
            check(s == 200 and o["object"] == "list" and len(o["data"]) == 3 and o["usage"]["prompt_tokens"] > 6,
                  "embeddings: %s %s" % (s, str(o)[:300]))
            got = [e["embedding"] for e in sorted(o["data"], key=lambda e: e["index"])]
            worst = max(abs(a - b) for g, w in zip(got, want) for a, b in zip(g, w))
            check(all(len(g) == len(w) == 384 for g, w in zip(got, want)) and worst <= 1e-6,
                  "embeddings equal `wgml embed`: worst %g" % worst)
            # base64: the same float32 bytes; dimensions: the first N values, normalized again
            s, o, _ = request(port, "POST", "/v1/embeddings", dict(input=texts[0], encoding_format="base64"), key=None)
            raw = base64.b64decode(o["data"][0]["embedding"])
            s, o, _ = request(port, "POST", "/v1/embeddings", dict(input=texts[0]), key=None)
            check(struct.unpack("<384f", raw) == struct.unpack("<384f", struct.pack("<384f", *o["data"][0]["embedding"])),
                  "base64 holds the float32 vector")
            s, o, _ = request(port, "POST", "/v1/embeddings", dict(input=texts[0], dimensions=64), key=None)
            v = o["data"][0]["embedding"]
            norm = sum(x * x for x in v) ** 0.5
            check(len(v) == 64 and abs(norm - 1) < 1e-5, "dimensions 64: %d values, norm %g" % (len(v), norm))
            # errors
            for body, status, param, code in [
                    (dict(input=""), 400, "input", None), (dict(input=[]), 400, "input", None),
                    (dict(input=[1, 2, 3]), 400, "input", None), (dict(), 400, "input", None),
                    (dict(input=["a", "b\u0000"]), 400, "input", None),
                    (dict(input="x", dimensions=0), 400, "dimensions", None),
                    (dict(input="x", encoding_format="hex"), 400, "encoding_format", None),
                    (dict(input="word " * 700), 400, "input", "context_length_exceeded")]:
                s, o, _ = request(port, "POST", "/v1/embeddings", body, key=None)
                check(s == status and o["error"]["param"] == param and (code is None or o["error"]["code"] == code),
                      "embeddings %s -> %s %s" % (str(body)[:40], s, o))
            s, o, _ = request(port, "POST", "/v1/chat/completions", dict(messages=[dict(role="user", content="hi")]),
                              key=None)
            check(s == 400 and o["error"]["code"] == "model_not_supported", "chat on an embedding model: %s %s" % (s, o))
            s, o, _ = request(port, "GET", "/v1/models", key=None)
            check(o["data"][0]["meta"]["capabilities"] == ["embeddings"], "capabilities %s" % o)
        finally:
            stop_server(p)
    # a model that only generates does not embed
    p, port = start()
    try:
        s, o, _ = request(port, "POST", "/v1/embeddings", dict(input="hi"), key=None)
        check(s == 400 and o["error"]["code"] == "model_not_supported", "embeddings on a llama model: %s %s" % (s, o))
    finally:
        stop_server(p)


def png_bytes(w, h, seed):
    """An 8-bit RGB PNG of w x h pixels (a pattern from seed), written with zlib and struct only."""
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    rows = b"".join(b"\0" + bytes(((x * 7 + y * 13 + seed * 31 + c * 85) * (seed + 3)) & 255
                                  for x in range(w) for c in range(3)) for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def png_header_only(w, h):
    """A black 8-bit gray PNG of w x h pixels (all zeros compress to almost nothing)."""
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(bytes((w + 1) * h), 9)) + chunk(b"IEND", b""))


def vision():
    """A vision model serves /v1/embeddings with {"image": ...} items (floats and base64) as `wgml embed --image`
    computes them, and a classifier /v1/classify as `wgml classify --json`; every bad input is a 400 the server
    lives through."""
    with tempfile.TemporaryDirectory() as d:
        vit, clip, emb = os.path.join(d, "vit.gguf"), os.path.join(d, "clip.gguf"), os.path.join(d, "minilm.gguf")
        for arch, path in (("vit-base", vit), ("clip-vit-b32", clip), ("all-minilm-l6", emb)):
            subprocess.run([CLI, "synth", "--arch", arch, "--type", "F16", "--layers", "1", "-o", path], check=True,
                           capture_output=True)
        pngs = [png_bytes(40, 30, 1), png_bytes(24, 48, 2), png_bytes(17, 17, 3)]
        files = []
        for i, b in enumerate(pngs):
            files.append(os.path.join(d, "%d.png" % i))
            with open(files[-1], "wb") as f:
                f.write(b)
        items = [{"image": "data:image/png;base64," + base64.b64encode(b).decode()} for b in pngs]
        items[2] = {"image": base64.b64encode(pngs[2]).decode()}  # bare base64 is taken too

        def cli_vectors(model):
            out = subprocess.run([CLI, "embed", "-m", model, "--backend", "cpu", "--image", *files], check=True,
                                 capture_output=True, text=True).stdout
            return [[float(x) for x in line.split()] for line in out.strip().splitlines()]

        def post(port, path, body):
            return request(port, "POST", path, body, key=None)

        def alive(port, what):
            s, o, _ = post(port, "/v1/embeddings", dict(input=items[:1]))
            check(s == 200 and len(o["data"]) == 1, "a good request after %s: %s" % (what, s))

        # the classifier: embeddings and labels
        want = cli_vectors(vit)
        want_cls = json.loads(subprocess.run([CLI, "classify", "-m", vit, "--backend", "cpu", "--json", "--top", "3",
                                              "--image", *files], check=True, capture_output=True, text=True).stdout)
        p, port = serve(vit)
        try:
            s, o, _ = post(port, "/v1/embeddings", dict(input=items, model="x"))
            got = [e["embedding"] for e in sorted(o["data"], key=lambda e: e["index"])] if s == 200 else []
            worst = max((abs(a - b) for g, w in zip(got, want) for a, b in zip(g, w)), default=1)
            check(s == 200 and o["object"] == "list" and o["model"] == "vit.gguf" and len(got) == 3 and
                  all(len(g) == len(w) for g, w in zip(got, want)) and worst <= 1e-5 and
                  o["usage"] == {"prompt_tokens": 0, "total_tokens": 0},
                  "image embeddings equal `wgml embed --image`: %s worst %g %s" % (s, worst, str(o)[:200]))
            s, o, _ = post(port, "/v1/embeddings", dict(input=items[1:2], encoding_format="base64"))
            raw = base64.b64decode(o["data"][0]["embedding"]) if s == 200 else b""
            n = len(want[1])
            check(len(raw) == 4 * n and max(abs(a - b) for a, b in zip(struct.unpack("<%df" % n, raw), want[1])) <= 1e-5,
                  "image embeddings in base64: %s %d bytes" % (s, len(raw)))
            s, o, _ = post(port, "/v1/classify", dict(input=items, top=3))
            check(s == 200 and o["object"] == "list" and o["model"] == "vit.gguf" and len(o["data"]) == 3,
                  "classify: %s %s" % (s, str(o)[:300]))
            for g, w in zip(o.get("data", []), want_cls["data"]):
                check(g["index"] == w["index"] and [(x["label"], x["index"]) for x in g["labels"]] ==
                      [(x["label"], x["index"]) for x in w["labels"]] and
                      all(abs(x["score"] - y["score"]) <= 1e-5 for x, y in zip(g["labels"], w["labels"])),
                      "classify %d equals `wgml classify --json`: %s %s" % (g["index"], g["labels"], w["labels"]))
            s, o, _ = post(port, "/v1/classify", dict(input=items[:1]))
            check(s == 200 and len(o["data"][0]["labels"]) == 5, "classify: 5 labels by default")
            s, o, _ = request(port, "GET", "/v1/models", key=None)
            check(o["data"][0]["meta"]["capabilities"] == ["embeddings.images", "classify"], "vit capabilities %s" % o)
            # errors: 400 with a message, and the server carries on
            png = base64.b64encode(pngs[0]).decode()
            garbage = base64.b64encode(b"GIF89a not really an image at all").decode()
            truncated = base64.b64encode(pngs[0][:60]).decode()
            huge = png_header_only(5000, 4000)  # 20 million pixels: over the 4096 x 4096 budget
            for body, path, want_msg in [
                    (dict(input=[{"image": "data:image/png;base64,iVBOR*w0"}]), "/v1/embeddings", "base64"),
                    (dict(input=[{"image": png[:-3]}]), "/v1/embeddings", "base64"),
                    (dict(input=[{"image": "data:text/plain;base64," + png}]), "/v1/embeddings", "data URL"),
                    (dict(input=[{"image": "https://example.com/cat.png"}]), "/v1/embeddings", "URL"),
                    (dict(input=[{"image": garbage}]), "/v1/embeddings", "GIF"),
                    (dict(input=[{"image": truncated}]), "/v1/classify", "input[0]"),
                    (dict(input=[{"image": base64.b64encode(huge).decode()}]), "/v1/embeddings", "limit"),
                    (dict(input=[{"image": png}] * 65), "/v1/embeddings", "1 to 64"),
                    (dict(input=[{"image": png}, {"text": "a cat"}]), "/v1/embeddings", "no text tower"),
                    (dict(input=[{"image": png}], labels=["a cat"]), "/v1/classify", "zero-shot"),
                    (dict(input=[{"image": png, "text": "x"}]), "/v1/embeddings", "input[0]"),
                    (dict(input=[{"image": 3}]), "/v1/classify", "input[0].image"),
                    (dict(input=[{"image": png}], dimensions=8), "/v1/embeddings", "dimensions"),
                    (dict(input=[{"image": png}], encoding_format="hex"), "/v1/embeddings", "encoding_format"),
                    (dict(input=[{"image": png}], top=0), "/v1/classify", "top"),
                    (dict(input="a cat"), "/v1/embeddings", "images only"),
                    (dict(input=[{"text": "a cat"}]), "/v1/embeddings", "images only")]:
                s, o, _ = post(port, path, body)
                msg = o["error"]["message"] if isinstance(o, dict) and "error" in o else ""
                check(s == 400 and want_msg in msg, "%s %s -> %s %s" % (path, str(body)[:60], s, msg or str(o)[:200]))
                alive(port, str(body)[:40])
        finally:
            stop_server(p)
        # CLIP with its text tower: images and texts in one request (in input order, as `wgml embed`
        # gives them), zero-shot /v1/classify with labels as `wgml classify --labels`, none without
        want = cli_vectors(clip)
        texts = ["a photo of a cat", "a dog"]
        out = subprocess.run([CLI, "embed", "-m", clip, "--backend", "cpu", "--text", *texts], check=True,
                             capture_output=True, text=True).stdout
        want_text = [[float(x) for x in line.split()] for line in out.strip().splitlines()]
        want_zero = json.loads(subprocess.run([CLI, "classify", "-m", clip, "--backend", "cpu", "--json", "--top", "2",
                                               "--image", *files, "--labels", *texts], check=True, capture_output=True,
                                              text=True).stdout)
        p, port = serve(clip)
        try:
            s, o, _ = post(port, "/v1/embeddings", dict(input=items))
            got = [e["embedding"] for e in o["data"]] if s == 200 else []
            worst = max((abs(a - b) for g, w in zip(got, want) for a, b in zip(g, w)), default=1)
            check(s == 200 and len(got) == 3 and worst <= 1e-5, "CLIP image embeddings: %s worst %g" % (s, worst))
            s, o, _ = post(port, "/v1/embeddings", dict(input=[items[0], texts[0], {"text": texts[1]}, items[1]]))
            got = [e["embedding"] for e in sorted(o["data"], key=lambda e: e["index"])] if s == 200 else []
            exp = [want[0], want_text[0], want_text[1], want[1]]
            worst = max((abs(a - b) for g, w in zip(got, exp) for a, b in zip(g, w)), default=1)
            check(s == 200 and len(got) == 4 and worst <= 1e-5 and o["usage"]["prompt_tokens"] > 0,
                  "CLIP images and texts in one request: %s worst %g %s" % (s, worst, str(o)[:200]))
            s, o, _ = post(port, "/v1/embeddings", dict(input=texts))
            got = [e["embedding"] for e in o["data"]] if s == 200 else []
            worst = max((abs(a - b) for g, w in zip(got, want_text) for a, b in zip(g, w)), default=1)
            check(s == 200 and worst <= 1e-5, "CLIP text embeddings: %s worst %g" % (s, worst))
            s, o, _ = post(port, "/v1/classify", dict(input=items, labels=texts, top=2))
            for g, w in zip(o.get("data", []) if s == 200 else [None], want_zero["data"]):
                check(g is not None and [(x["label"], x["index"]) for x in g["labels"]] ==
                      [(x["label"], x["index"]) for x in w["labels"]] and
                      all(abs(x["score"] - y["score"]) <= 1e-5 for x, y in zip(g["labels"], w["labels"])),
                      "zero-shot classify equals `wgml classify --labels`: %s %s" % (g, w["labels"]))
            for body, want_msg in [(dict(input=items[:1]), "give 'labels'"),
                                   (dict(input=items[:1], labels=[]), "'labels' must be"),
                                   (dict(input=items[:1], labels="a cat"), "'labels' must be"),
                                   (dict(input=items[:1], labels=["a cat", 3]), "labels[1]"),
                                   (dict(input=items[:1], labels=["a\u0000cat"]), "U+0000"),
                                   (dict(input=[texts[0]], labels=texts), "images only")]:
                s, o, _ = post(port, "/v1/classify", body)
                msg = o["error"]["message"] if isinstance(o, dict) and "error" in o else ""
                check(s == 400 and want_msg in msg, "/v1/classify %s -> %s %s" % (str(body)[:60], s, msg or str(o)[:200]))
                alive(port, str(body)[:40])
            s, o, _ = request(port, "GET", "/v1/models", key=None)
            check(o["data"][0]["meta"]["capabilities"] == ["embeddings", "embeddings.images", "classify"],
                  "clip capabilities %s" % o)
        finally:
            stop_server(p)
        # a text embedding model takes {"text": ...} items and refuses images
        p, port = serve(emb)
        try:
            s, o, _ = post(port, "/v1/embeddings", dict(input=[{"text": "a cat"}, "a dog"]))
            s2, o2, _ = post(port, "/v1/embeddings", dict(input=["a cat", "a dog"]))
            check(s == 200 and s2 == 200 and o["data"] == o2["data"], "{\"text\": ...} items: %s %s" % (s, s2))
            s, o, _ = post(port, "/v1/embeddings", dict(input=items[:1]))
            check(s == 400 and "texts only" in o["error"]["message"], "an image to a text model: %s %s" % (s, o))
            s, o, _ = post(port, "/v1/classify", dict(input=items[:1]))
            check(s == 400 and o["error"]["code"] == "model_not_supported", "classify on a text model: %s %s" % (s, o))
            s, o, _ = post(port, "/v1/embeddings", dict(input="a cat"))
            check(s == 200, "a good request after the errors: %s" % s)
        finally:
            stop_server(p)


if __name__ == "__main__":
    part = sys.argv[3] if len(sys.argv) > 3 else "all"  # ctest runs "main", "models" and "hostile" side by side
    if part in ("all", "main"):
        main()
    if part in ("all", "models"):
        embeddings()
        vision()
        transcription()
        speech()
        several_models()
    if part in ("all", "hostile"):
        hostile()
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("test_serve %s: all passed" % part)
