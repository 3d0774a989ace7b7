"""An independent subscriber of a running `tarmac serve`'s KV events, written against vLLM's
framing with Debian's python3-zmq and python3-msgpack only (no tarmac code): a SUB socket gets
3-frame messages (topic, big-endian uint64 sequence, msgpack [ts float, events, dp rank]) while
this script drives a workload over HTTP; a DEALER on the replay socket sends ["", start_seq] and
reads [""] + [seq, payload] frames until the end marker (seq -1, empty payload). Checks: the
topic, consecutive sequence numbers, the batch and event structure (positional [tag, fields]),
replayed bytes equal to the live ones, the stream from 0 opening with AllBlocksCleared, every
parent announced before its child, and the rebuilt block set as large as the server says its
cache is. Exit status 0 when all hold; otherwise the first failure on stderr.
    kv_events_subscriber.py PUB_ENDPOINT REPLAY_ENDPOINT TOPIC HTTP_PORT MODEL"""
import json
import sys
import time
import urllib.request

import msgpack
import zmq

STORED_FIELDS = 7  # block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name
REMOVED_FIELDS = 2  # block_hashes, medium


def fail(msg):
    sys.stderr.write(f"kv_events_subscriber: {msg}\n")
    sys.exit(1)


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    fail(f"/metrics has no {name}")


def check_batch(seq, payload):
    batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if not (isinstance(batch, list) and len(batch) == 3):
        fail(f"seq {seq}: a batch is [ts, events, data_parallel_rank], got {batch!r:.200}")
    ts, events, rank = batch
    if not isinstance(ts, float) or abs(ts - time.time()) > 3600:
        fail(f"seq {seq}: ts {ts!r} is not a float64 wall-clock time")
    if not (rank is None or isinstance(rank, int)) or not isinstance(events, list):
        fail(f"seq {seq}: bad rank {rank!r} or events")
    for e in events:
        if not (isinstance(e, list) and e and isinstance(e[0], str)):
            fail(f"seq {seq}: an event is [tag, fields...], got {e!r:.200}")
        want = {"BlockStored": STORED_FIELDS, "BlockRemoved": REMOVED_FIELDS, "AllBlocksCleared": 0}.get(e[0])
        if want is None or len(e) != 1 + want:
            fail(f"seq {seq}: event {e[0]!r} with {len(e) - 1} fields")
        if e[0] == "BlockStored":
            hashes, parent, tokens, block_size, lora_id, medium, lora_name = e[1:]
            if len(tokens) != block_size * len(hashes) or not all(isinstance(h, int) and 0 <= h < 2**64 for h in hashes):
                fail(f"seq {seq}: BlockStored with {len(hashes)} hashes, {len(tokens)} tokens of block_size {block_size}")
            if lora_id is not None or lora_name is not None or not isinstance(medium, str):
                fail(f"seq {seq}: BlockStored lora_id {lora_id!r}, medium {medium!r}, lora_name {lora_name!r}")
    return events


def main():
    pub, replay_ep, topic, port, model = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
    sub.connect(pub)
    time.sleep(0.5)  # the subscription reaches the publisher

    live = {}

    def drain(timeout_ms):
        while sub.poll(timeout_ms):
            frames = sub.recv_multipart()
            if len(frames) != 3:
                fail(f"a message has {len(frames)} frames, not 3")
            if frames[0].decode() != topic:
                fail(f"topic {frames[0]!r}, expected {topic!r}")
            if len(frames[1]) != 8:
                fail(f"the sequence frame has {len(frames[1])} bytes, not 8")
            seq = int.from_bytes(frames[1], "big")
            if live and seq != max(live) + 1:
                fail(f"sequence {seq} after {max(live)}")
            check_batch(seq, frames[2])
            live[seq] = frames[2]
            timeout_ms = 0

    stems = ["The Rostovs' house in Moscow was full of guests on the name day of the mother and daughter, ",
             "Prince Andrew looked at the sky above Austerlitz, high and endless, with grey clouds over it, "]
    for i in range(40):  # shared stems, a small pool: stores and evictions
        post(port, "/v1/completions", {"model": model, "prompt": stems[i % 2] + f"part {i * 7919 % 1000}, and then",
                                       "max_tokens": 12, "ignore_eos": True})
        drain(0)
    for _ in range(100):  # idle: everything the server counted has arrived
        drain(50)
        if live and metric(port, "tarmac:kv_events_messages_total") == max(live) + 1:
            break
    if not live:
        fail("no message on the SUB socket")

    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(replay_ep)
    dealer.send_multipart([b"", (0).to_bytes(8, "big")])
    replayed = []
    while True:
        if not dealer.poll(5000):
            fail("the replay did not end with the end marker")
        frames = dealer.recv_multipart()
        if len(frames) != 3 or frames[0] != b"":
            fail(f"a replay reply is ['', seq, payload], got {len(frames)} frames")
        if frames[1] == (-1).to_bytes(8, "big", signed=True):
            if frames[2] != b"":
                fail("the end marker has a payload")
            break
        replayed.append((int.from_bytes(frames[1], "big"), frames[2]))
    seqs = [s for s, _ in replayed]
    if seqs != list(range(len(replayed))):
        fail(f"the replay from 0 gave sequence numbers {seqs[:5]}... of {len(seqs)}, not 0, 1, 2, ...")
    if len(replayed) != max(live) + 1:
        fail(f"the replay has {len(replayed)} messages, the stream {max(live) + 1}")
    for s, payload in replayed:
        if s in live and live[s] != payload:
            fail(f"replayed seq {s} differs from the live message")

    blocks, cleared = set(), 0
    for s, payload in replayed:
        for e in check_batch(s, payload):
            if e[0] == "AllBlocksCleared":
                blocks.clear()
                cleared += 1
            elif e[0] == "BlockStored":
                parent = e[2]
                for h in e[1]:
                    if parent is not None and parent not in blocks:
                        fail(f"seq {s}: block {h} stored before its parent {parent}")
                    blocks.add(h)
                    parent = h
            else:
                for h in e[1]:
                    if h not in blocks:
                        fail(f"seq {s}: removal of unknown block {h}")
                    blocks.discard(h)
    first = msgpack.unpackb(replayed[0][1], raw=False)[1]
    if not first or first[0][0] != "AllBlocksCleared":
        fail("the stream does not open with AllBlocksCleared")
    cached = metric(port, "tarmac:kv_cache_cached_blocks")
    evicted = metric(port, "tarmac:prefix_cache_evicted_blocks_total")
    if len(blocks) != cached:
        fail(f"rebuilt {len(blocks)} blocks, the server caches {cached:.0f}")
    if evicted <= 0:
        fail("no eviction: the workload did not exercise BlockRemoved")
    print(f"kv_events_subscriber: {len(replayed)} messages, {len(blocks)} blocks, {evicted:.0f} evicted, ok")


if __name__ == "__main__":
    main()
