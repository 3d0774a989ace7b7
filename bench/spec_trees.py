#!/usr/bin/env python3
"""Speculation with the distilled draft and token trees (issue 27), through `tarmac bench offline`.

Called by bench/spec_bench.sh. Every run takes the bench lock on its own (a few tens of seconds)
and latency runs are under `chrt -f 10`. Configurations alternate within each round, so the
ratios compare runs minutes apart at most; medians over the rounds.
  padded   batch 1, T=0 and T=0.8, held-out prompts (the book's last 50,000 bytes): off, chains
           (wp-1m k=3, distilled k=2,3,4), distilled trees (fixed shapes), --spec auto (trees,
           distilled draft), --spec auto with chains only
  plain    wp-11m batch 1 T=0: off, distilled k=3, auto
  big      wp-11m batch 32 and 64: off vs auto
Prints one line per configuration and a JSON summary (--json FILE).
"""
import argparse, json, statistics, subprocess, sys

p = argparse.ArgumentParser()
p.add_argument("--bin", default="build/bin/tarmac")
p.add_argument("--pad", required=True)
p.add_argument("--wp", default="models/wp-11m-f16.gguf")
p.add_argument("--wp1m", default="models/wp-1m-f16.gguf")
p.add_argument("--distill", default="models/wp-1m-distill-f16.gguf")
p.add_argument("--text", required=True, help="held-out prompt text")
p.add_argument("--reps", type=int, default=3)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--sections", default="padded,plain,big,accept")
p.add_argument("--temps", default="0,0.8")
p.add_argument("--json")
p.add_argument("--full", action="store_true", help="more chain and tree shapes at T=0")
a = p.parse_args()

LOCK = ["flock", "/tmp/tarmac-bench.lock"]


def run(model, extra, requests, conc, out_len, prompt_len=64, rt=True):
    cmd = LOCK + (["chrt", "-f", "10"] if rt else []) + [
        a.bin, "bench", "offline", "--json", "-t", str(a.threads), "-m", model,
        "--requests", str(requests), "--concurrency", str(conc), "--prompt-len", str(prompt_len),
        "--output-len", str(out_len), "--workload", "text", "--prompt-file", a.text] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def draft(path, k, tree="off"):
    return ["--spec", "draft", "--draft-model", path, "--spec-k", str(k), "--spec-tree", tree]


def auto(path, tree="auto"):
    return ["--spec", "auto", "--draft-model", path, "--spec-tree", tree]


summary = {}


def section(name, model, configs, requests, conc, out_len, temp, rt=True):
    """configs: [(label, args)], the first is the reference (off)."""
    res = {label: [] for label, _ in configs}
    for rep in range(a.reps):
        order = configs if rep % 2 == 0 else configs[:1] + configs[1:][::-1]
        for label, extra in order:
            res[label].append(run(model, extra + ["--temp", str(temp)], requests, conc, out_len, rt=rt))
    off = [r["output_tokens_per_s"] for r in res[configs[0][0]]]
    out = {}
    for label, _ in configs:
        tps = [r["output_tokens_per_s"] for r in res[label]]
        ratios = [x / y for x, y in zip(tps, off)]  # per round: the runs minutes apart
        mal = statistics.median(r.get("mean_accepted_length", 0) for r in res[label])
        out[label] = {"tok_s": statistics.median(tps), "ratio": statistics.median(ratios),
                      "ratios": ratios, "mean_accepted": mal,
                      "acceptance": statistics.median(r.get("acceptance_rate", 0) for r in res[label])}
        print(f"{name:28s} {label:30s} {out[label]['tok_s']:8.2f} tok/s  {out[label]['ratio']:.3f}x off "
              f"(rounds {', '.join(f'{x:.3f}' for x in ratios)})  mean accepted/verify {mal:.2f}", flush=True)
    summary[name] = out


sections = a.sections.split(",")
if "padded" in sections:
    for temp in [float(t) for t in a.temps.split(",")]:
        cfgs = [("off", []), ("wp-1m chain k=3", draft(a.wp1m, 3)),
                ("distilled chain k=3", draft(a.distill, 3)),
                ("distilled tree k=4 3x2", draft(a.distill, 4, "3x2")),
                ("auto trees", auto(a.distill))]
        if a.full:
            cfgs[3:3] = [("distilled chain k=4", draft(a.distill, 4)),
                         ("distilled tree k=3 2x2", draft(a.distill, 3, "2x2")),
                         ("distilled tree k=4 3x3", draft(a.distill, 4, "3x3")),
                         ("auto chains", auto(a.distill, "off"))]
        if temp > 0:
            cfgs = [c for c in cfgs if c[0] in ("off", "distilled chain k=3", "distilled tree k=4 3x2", "auto chains", "auto trees")]
        section(f"padded b1 T={temp:g}", a.pad, cfgs, 4, 1, 128, temp)
if "plain" in sections:
    section("wp-11m b1 T=0", a.wp, [("off", []), ("distilled chain k=3", draft(a.distill, 3)),
                                     ("auto trees", auto(a.distill))], 8, 1, 128, 0)
if "big" in sections:
    for c in (32, 64):
        section(f"wp-11m batch {c} T=0", a.wp, [("off", []), ("auto trees", auto(a.distill))], c, c, 64, 0, rt=False)
if "accept" in sections:
    # Mean accepted tokens per verification (timing-free: the padded target computes wp-11m's
    # function, so acceptance is measured on wp-11m itself), 8 held-out prompts x 128 tokens.
    acc = {}
    for name, path in (("wp-1m", a.wp1m), ("distilled", a.distill)):
        for k in (1, 2, 3, 4):
            for tree in ("off", "1x1", "2x1", "2x2", "3x2", "3x3"):
                if tree != "off" and (k == 1 and tree not in ("1x1", "2x1")):
                    continue
                r = run(a.wp, draft(path, k, tree) + ["--temp", "0"], 8, 1, 128, rt=False)
                label = f"{name} k={k} " + ("chain" if tree == "off" else f"tree {tree}")
                acc[label] = {"mean_accepted": r["mean_accepted_length"], "acceptance": r["acceptance_rate"]}
                print(f"accepted per verification  {label:28s} {r['mean_accepted_length']:.3f}", flush=True)
    summary["accepted_per_verification"] = acc
if a.json:
    json.dump(summary, open(a.json, "w"), indent=1)
