"""Checks one KV-event batch (a file) with python3-msgpack, independently of tarmac's decoder:
the batch is [ts float, events, data_parallel_rank int]; events carry vLLM's fields in vLLM's
order (array form: [tag, fields...], as llm-d's msgpack structs read them) or by name (map
form, tagged by "type"). The batch written by wire_format_test holds AllBlocksCleared, two
chained stored blocks (hash 2^63, then 5 with tokens [1, 2, 3, 4]) and the removal of 5."""
import sys

import msgpack

STORED = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"]
REMOVED = ["block_hashes", "medium"]


def fields(event, form):
    if form == "array":
        assert isinstance(event, list) and isinstance(event[0], str), event
        names = {"BlockStored": STORED, "BlockRemoved": REMOVED, "AllBlocksCleared": []}[event[0]]
        assert len(event) == 1 + len(names), event
        return event[0], dict(zip(names, event[1:]))
    assert isinstance(event, dict), event
    rest = {k: v for k, v in event.items() if k != "type"}
    expected = {"BlockStored": STORED, "BlockRemoved": REMOVED, "AllBlocksCleared": []}[event["type"]]
    assert list(rest) == expected, (list(rest), expected)
    return event["type"], rest


def main():
    form, path = sys.argv[1], sys.argv[2]
    batch = msgpack.unpackb(open(path, "rb").read(), raw=False, strict_map_key=False)
    assert isinstance(batch, list) and len(batch) == 3, batch
    ts, events, rank = batch
    assert isinstance(ts, float) and ts == 1.5, ts
    assert rank == 0, rank
    got = [fields(e, form) for e in events]
    assert [t for t, _ in got] == ["AllBlocksCleared", "BlockStored", "BlockRemoved"], got
    stored = got[1][1]
    assert stored["block_hashes"] == [1 << 63, 5], stored
    assert stored["parent_block_hash"] is None
    assert stored["token_ids"] == [1, 2, 3, 4]
    assert stored["block_size"] == 2
    assert stored["lora_id"] is None and stored["lora_name"] is None
    assert stored["medium"] == "CPU"
    assert got[2][1] == {"block_hashes": [5], "medium": "CPU"}, got[2]


if __name__ == "__main__":
    main()
