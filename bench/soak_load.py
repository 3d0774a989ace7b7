#!/usr/bin/env python3
"""The soak's client (bench/soak.sh runs it): a request mix against one tarmac server, and a
sampler of the server process (/proc/PID) beside it.

  soak_load.py capacity --url U --keys K --seconds S --concurrency C --out DIR
      closed loop, C clients, the mix without cancellations: prints completed requests/s
  soak_load.py soak --url U --keys K --seconds S --rate R --pid P --warmup W --out DIR
      open loop (Poisson arrivals at R requests/s) with the whole mix for S seconds, sampling
      the server every 5 s; writes DIR/samples.tsv (t, rss_kib, fds, threads, p99_ms, done,
      errors) and DIR/requests.tsv, prints one JSON summary line.

The mix (by weight): chat and completions, streamed and not, speculative (the server runs a
draft model; a few requests opt out with "speculative": false), cached (deterministic requests
with "cache": true over a small set of prompts, so the response cache fills during warm-up),
prefix-sharing (one long system prompt), and cancelled (a streamed request whose client closes
the connection after the first chunks). Tenants: one API key per tenant, round robin.
A latency is the time from a request's scheduled arrival to its last byte (so a client that
falls behind shows as latency, not as a lower rate). Every response other than a 200 with a
complete body (and "data: [DONE]" when streamed) is an error, except the cancellations.
"""
import argparse
import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

SYSTEM = ("You are a careful assistant for a library of classic Russian novels. Answer briefly, in plain "
          "prose, and name the chapter when you can. ") * 4
TOPICS = ["Pierre", "Natasha", "Andrei", "Moscow", "Borodino", "the ball", "Kutuzov", "Napoleon",
          "the winter", "the estate", "Nikolai", "Sonya", "the war", "the peace", "a letter", "the duel"]

# (kind, weight)
MIX = [("chat", 20), ("chat_stream", 15), ("completion", 15), ("completion_stream", 10),
       ("cached", 15), ("prefix_chat", 10), ("no_spec", 5), ("cancel", 10)]


def make_request(kind, rng):
    topic = rng.choice(TOPICS)
    max_tokens = rng.randint(8, 32)
    if kind == "cached":
        i = rng.randrange(24)  # a small set: the response cache fills during warm-up
        return "/v1/chat/completions", {"model": "wp-11m", "messages": [
            {"role": "user", "content": f"Question {i}: who is {TOPICS[i % len(TOPICS)]}?"}],
            "max_tokens": 16, "temperature": 0, "cache": True}, False
    if kind == "prefix_chat":
        return "/v1/chat/completions", {"model": "wp-11m", "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Tell me about {topic}."}], "max_tokens": max_tokens}, False
    if kind.startswith("completion"):
        stream = kind.endswith("stream")
        return "/v1/completions", {"model": "wp-11m", "prompt": f"Chapter {rng.randint(1, 300)}. {topic} said",
                                   "max_tokens": max_tokens, "temperature": 0.8, "seed": rng.randint(0, 1 << 30),
                                   "stream": stream}, stream
    stream = kind in ("chat_stream", "cancel")
    body = {"model": "wp-11m", "messages": [{"role": "user", "content": f"What happened to {topic}?"}],
            "max_tokens": 48 if kind == "cancel" else max_tokens, "stream": stream}
    if kind == "no_spec":
        body["speculative"] = False
    return "/v1/chat/completions", body, stream


def one_request(url, key, kind, rng, timeout=120):
    """Returns (ok, status, detail, latency_s)."""
    path, body, stream = make_request(kind, rng)
    u = urllib.parse.urlparse(url)
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
        resp = conn.getresponse()
        if resp.status != 200:
            return False, resp.status, resp.read()[:200].decode("utf-8", "replace"), time.monotonic() - t0
        if kind == "cancel":
            got = 0
            while got < 2:  # two chunks, then the client goes away mid-stream
                line = resp.fp.readline()
                if not line:
                    return False, 200, "stream ended before the cancellation", time.monotonic() - t0
                if line.startswith(b"data: "):
                    got += 1
            conn.sock.close()
            return True, 200, "cancelled", time.monotonic() - t0
        data = resp.read()
        if stream:
            if b"data: [DONE]" not in data:
                return False, 200, "stream without [DONE]", time.monotonic() - t0
            if b'"error"' in data:
                return False, 200, "error event in stream", time.monotonic() - t0
        else:
            j = json.loads(data)
            if not j.get("choices"):
                return False, 200, "no choices", time.monotonic() - t0
        return True, 200, "", time.monotonic() - t0
    except Exception as e:  # a reset, a timeout: unexpected
        return False, -1, f"{type(e).__name__}: {e}", time.monotonic() - t0
    finally:
        conn.close()


def pick(rng, mix):
    total = sum(w for _, w in mix)
    x = rng.uniform(0, total)
    for k, w in mix:
        x -= w
        if x <= 0:
            return k
    return mix[-1][0]


def proc_sample(pid):
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, fds, threads


def p99(xs):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(0.99 * len(s)))]


def capacity(a):
    keys = a.keys.split(",")
    mix = [(k, w) for k, w in MIX if k != "cancel"]
    stop = time.monotonic() + a.seconds
    done = []
    errors = []
    lock = threading.Lock()

    def worker(i):
        rng = random.Random(1000 + i)
        while time.monotonic() < stop:
            ok, status, detail, lat = one_request(a.url, keys[i % len(keys)], pick(rng, mix), rng)
            with lock:
                (done if ok else errors).append((status, detail))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.concurrency)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    print(json.dumps({"requests_per_s": len(done) / elapsed, "done": len(done), "errors": len(errors),
                      "first_errors": errors[:5], "seconds": elapsed}))


def soak(a):
    keys = a.keys.split(",")
    rng = random.Random(7)
    lock = threading.Lock()
    window = []          # latencies of requests finished in the current sample window
    counts = {"done": 0, "errors": 0, "cancelled": 0, "submitted": 0}
    first_errors = []
    req_log = open(os.path.join(a.out, "requests.tsv"), "w")
    req_log.write("t_s\tkind\ttenant\tok\tstatus\tlatency_ms\tdetail\n")
    t_start = time.monotonic()

    def run(kind, key, scheduled, seed):
        ok, status, detail, _ = one_request(a.url, key, kind, random.Random(seed))
        lat = time.monotonic() - scheduled
        with lock:
            req_log.write(f"{scheduled - t_start:.3f}\t{kind}\t{key}\t{int(ok)}\t{status}\t{lat * 1000:.1f}\t{detail}\n")
            if not ok:
                counts["errors"] += 1
                if len(first_errors) < 10:
                    first_errors.append({"kind": kind, "status": status, "detail": detail})
            elif kind == "cancel":
                counts["cancelled"] += 1
            else:
                counts["done"] += 1
                window.append(lat)

    samples = open(os.path.join(a.out, "samples.tsv"), "w")
    samples.write("t_s\trss_kib\tfds\tthreads\tp99_ms\tdone\terrors\n")
    stop_sampling = threading.Event()

    def sampler():
        while not stop_sampling.wait(5.0):
            rss, fds, nthreads = proc_sample(a.pid)
            with lock:
                lat = window[:]
                window.clear()
                d, e = counts["done"], counts["errors"]
            samples.write(f"{time.monotonic() - t_start:.1f}\t{rss}\t{fds}\t{nthreads}\t{p99(lat) * 1000:.1f}\t{d}\t{e}\n")
            samples.flush()

    st = threading.Thread(target=sampler)
    st.start()
    pool = ThreadPoolExecutor(max_workers=a.max_clients)
    next_t = time.monotonic()
    end = t_start + a.seconds
    i = 0
    while True:
        next_t += rng.expovariate(a.rate)
        if next_t >= end:
            break
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        kind = pick(rng, MIX)
        pool.submit(run, kind, keys[i % len(keys)], next_t, rng.randrange(1 << 30))
        counts["submitted"] += 1
        i += 1
    pool.shutdown(wait=True)
    stop_sampling.set()
    st.join()
    samples.close()
    req_log.close()
    print(json.dumps({"seconds": time.monotonic() - t_start, "rate": a.rate, **counts, "first_errors": first_errors}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["capacity", "soak"])
    ap.add_argument("--url", required=True)
    ap.add_argument("--keys", required=True, help="API keys, comma-separated (one per tenant)")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rate", type=float, default=1.0)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--max-clients", type=int, default=128)
    ap.add_argument("--warmup", type=float, default=0)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    capacity(a) if a.mode == "capacity" else soak(a)


if __name__ == "__main__":
    sys.exit(main())
