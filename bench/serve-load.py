#!/usr/bin/env python3
"""serve-load.py - a load test of `wgml serve`: many concurrent clients, then what came back
and what the server holds afterwards.

    bench/serve-load.py [--cli build/wgml] [--model models/stories260K.gguf] [--clients 64]
                        [--requests 8] [--parallel 4] [--queue 128] [--tokens 64] [--rounds 4]

Starts the server, measures its resident memory (VmRSS), then runs --clients threads at
once, each sending --requests requests in turn: chat and completions, half of them
streamed, greedy, each with a random max_tokens of 1 to --tokens and a random prompt
length (a seeded generator: every round the same). Every 4th client disconnects from its
streams after the first event. Every other request must complete correctly: 200, a
finish_reason, usage whose completion_tokens are within max_tokens, text for a reply
that is not empty, and a stream ending in data: [DONE]. With the default queue every
request fits (64 clients, 4 slots + 128 places); a smaller --queue shows 503s, which
then also count as correct. Prints the status counts, the latency percentiles, the server's /metrics
counters, its memory before and after each of --rounds identical rounds (after the first,
which brings in the threads' stacks and the allocator's arenas, it must level off: a leak
would keep it growing; glibc's per-thread caches of freed chunks fill over several rounds,
so run with GLIBC_TUNABLES=glibc.malloc.tcache_count=0 to see the heap alone), and whether
/health is back to all slots free and an empty queue.
A chat stream's first event (the role) comes before the request has a slot, so the
clients that leave after it leave queued requests behind; those hold their queue places
until the next keep-alive write finds them gone (`--sse-keepalive`, 1 s).
Exits 1 when a request got an answer other than 200 or 503, the server died, or slots or
queue places leaked. Python's standard library only.
"""
import argparse
import http.client
import json
import random
import socket
import subprocess
import sys
import threading
import time


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default="build/wgml")
    ap.add_argument("--model", default="models/stories260K.gguf")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--queue", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    p = subprocess.Popen([a.cli, "serve", "-m", a.model, "--backend", "cpu", "--port", "0", "--parallel",
                          str(a.parallel), "--queue", str(a.queue)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline()
    if not line.startswith("listening on http://127.0.0.1:"):
        sys.exit("the server did not start: %r" % line)
    port = int(line.rsplit(":", 1)[1])

    def get(path):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, body

    prompts = ["Once upon a time", "The little dog ran to the park", "Lily and Ben were friends",
               "One day, a boy named Tom wanted to play"]

    words = "once upon a time there was a little girl named lily who loved to play in the park".split()

    def one(i, k, results, lock):
        rng = random.Random(1000 * i + k)
        chat, stream = rng.random() < 0.5, rng.random() < 0.5
        prompt = " ".join(rng.choice(words) for _ in range(rng.randint(1, 40)))
        max_tokens = rng.randint(1, a.tokens)
        body = dict(max_tokens=max_tokens, temperature=0, stream=stream)
        if chat:
            body["messages"] = [dict(role="user", content=prompt)]
        else:
            body["prompt"] = prompt
        t0 = time.time()
        status, why = -1, ""
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            c.request("POST", "/v1/chat/completions" if chat else "/v1/completions", body=json.dumps(body).encode(),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            status = r.status
            if stream and status == 200:
                events, finish = [], None
                while True:
                    ln = r.readline()
                    if not ln:
                        break
                    if not ln.startswith(b"data: "):
                        continue
                    payload = ln[6:].strip()
                    events.append(payload)
                    if i % 4 == 3:  # this client goes away after the first event
                        c.sock.shutdown(socket.SHUT_RDWR)
                        status = "disconnected"
                        break
                    if payload != b"[DONE]":
                        for ch in json.loads(payload).get("choices", []):
                            finish = ch.get("finish_reason") or finish
                if status == 200 and (not events or events[-1] != b"[DONE]" or finish not in ("stop", "length")):
                    why = "stream ended without a finish_reason and [DONE]"
            else:
                o = json.loads(r.read())
                if status == 200:
                    ch, u = o["choices"][0], o["usage"]
                    if ch["finish_reason"] not in ("stop", "length") or not 0 <= u["completion_tokens"] <= max_tokens:
                        why = "bad finish_reason or usage: %s" % o
                elif status != 503:
                    why = "status %d: %s" % (status, o)
            c.close()
        except Exception as e:  # noqa: BLE001 - counted and reported
            status, why = "error", "%s: %s" % (type(e).__name__, e)
        with lock:
            results.append((status, time.time() - t0, why))

    def round_():
        results, lock = [], threading.Lock()

        def client(i):
            for k in range(a.requests):
                one(i, k, results, lock)
        ts = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
        t0 = time.time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return results, time.time() - t0

    get("/health")
    before = rss_kib(p.pid)
    out = {}
    ok = True
    names = ["round %d" % (r + 1) for r in range(max(2, a.rounds))]
    for name in names:
        results, secs = round_()
        counts = {}
        for s, _, _ in results:
            counts[str(s)] = counts.get(str(s), 0) + 1
        lat = sorted(d for s, d, _ in results if s == 200)
        wrong = [w for _, _, w in results if w]
        if wrong:
            print("  %d incorrect: %s" % (len(wrong), wrong[:3]))
        pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
        time.sleep(0.5)
        status, health = get("/health")
        h = json.loads(health)
        rss = rss_kib(p.pid)
        out[name] = dict(counts=counts, seconds=round(secs, 2), p50_s=round(pct(0.5), 3), p95_s=round(pct(0.95), 3),
                         rss_kib=rss, health=h)
        print("%s: %d requests in %.1f s: %s; latency of 200s p50 %.3f s, p95 %.3f s; RSS %d KiB; health %s" %
              (name, len(results), secs, counts, pct(0.5), pct(0.95), rss, h))
        bad = {k: v for k, v in counts.items() if k not in ("200", "503", "disconnected")}
        if bad or wrong or h["slots_busy"] or h["queue_length"] or p.poll() is not None:
            ok = False
    status, metrics = get("/metrics")
    keep = ("wgml_requests_total", "wgml_requests_cancelled_total", "wgml_generated_tokens_total",
            "wgml_prompt_tokens_total", "wgml_steps_total")
    for ln in metrics.splitlines():
        if ln.startswith(keep):
            print("  " + ln)
    print("RSS (KiB): %d idle, then after each round %s; from round 2 to the last: %+d KiB" %
          (before, [out[n]["rss_kib"] for n in names], out[names[-1]]["rss_kib"] - out[names[1]]["rss_kib"]))
    p.terminate()
    p.wait(timeout=60)
    if not ok:
        print("FAIL: incorrect answers, unexpected statuses, leaked slots or queue places, or the server died")
        sys.exit(1)


if __name__ == "__main__":
    main()
