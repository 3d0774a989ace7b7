// The same GGUF through llama.cpp (node-llama-cpp 3.21.1, CPU) and through tarmac (bench's
// arch_check binary), in one run: greedy continuations, prompt log-probabilities and
// perplexity. Prints one JSON line per model; optionally writes a golden file for tests/.
//
// Usage: node compare_arch.mjs --tarmac BIN [--text FILE] [--prompts N] [--prompt-tokens P]
//        [--steps S] [--ppl-tokens T] [--threads T] [--near-tie E]
//        [--golden OUT.json --make-random JSON] MODEL.gguf...
//
// Prompts and the perplexity slice come from the last 50,000 bytes of --text (War and Peace),
// tokenized by llama.cpp; both sides get the same token ids, so tokenizers do not enter.
// Greedy: llama.cpp's continuation of S tokens is fed to tarmac token by token (teacher
// forcing); a step agrees when tarmac's argmax is llama.cpp's token, and is a near-tie when
// it is not but the two candidates are within E nats (llama.cpp's top-2 margin or tarmac's
// gap to llama.cpp's token). tarmac's own free-running continuation is reported too.
// Exit code: 0 when every step agrees or is a near-tie and every perplexity is within 0.5%,
// 1 otherwise, 2 on bad usage.
import {execFileSync} from "node:child_process";
import {readFileSync, writeFileSync, mkdtempSync} from "node:fs";
import {tmpdir} from "node:os";
import {join} from "node:path";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const argv = process.argv.slice(2);
const opt = {tarmac: null, text: null, prompts: 4, promptTokens: 32, steps: 64, pplTokens: 512,
             threads: 2, nearTie: 0.02, golden: null, makeRandom: null};
const files = [];
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--tarmac") opt.tarmac = argv[++i];
  else if (a === "--text") opt.text = argv[++i];
  else if (a === "--prompts") opt.prompts = Number(argv[++i]);
  else if (a === "--prompt-tokens") opt.promptTokens = Number(argv[++i]);
  else if (a === "--steps") opt.steps = Number(argv[++i]);
  else if (a === "--ppl-tokens") opt.pplTokens = Number(argv[++i]);
  else if (a === "--threads") opt.threads = Number(argv[++i]);
  else if (a === "--near-tie") opt.nearTie = Number(argv[++i]);
  else if (a === "--golden") opt.golden = argv[++i];
  else if (a === "--make-random") opt.makeRandom = JSON.parse(argv[++i]);
  else files.push(a);
}
if (!opt.tarmac || !opt.text || files.length === 0 || (opt.golden && files.length !== 1)) {
  console.error("usage: node compare_arch.mjs --tarmac BIN --text FILE [--golden OUT.json " +
                "--make-random JSON] MODEL.gguf...");
  process.exit(2);
}

const bytes = readFileSync(opt.text);
const tail = bytes.subarray(Math.max(0, bytes.length - 50000)).toString("utf8");
const llama = await getLlama({gpu: false, logLevel: LlamaLogLevel.error});

// Log-probabilities from node-llama-cpp's probability map (softmax of the greedy sampler's
// full, untouched candidate list).
const logp = (p) => Math.log(Math.max(p, 1e-45));
function top2(probs) {
  const it = probs.entries();
  const a = it.next().value, b = it.next().value;  // the map is sorted by probability
  return {token: a[0], margin: logp(a[1]) - logp(b ? b[1] : 0)};
}
const topK = (probs, k) => [...probs.entries()].slice(0, k).map(([id, p]) => [id, logp(p)]);

async function runLlama(model, prompts, pplIds, contextSize) {
  const context = await model.createContext({contextSize, threads: opt.threads,
                                             batchSize: Math.min(512, contextSize)});
  const seq = context.getSequence();
  const cases = [];
  for (const prompt of prompts) {
    await seq.clearHistory();
    const out = await seq.controlledEvaluate(
        prompt.map((t) => [t, {generateNext: {probabilities: true}}]));
    const top = out.map((o) => topK(o.next.probabilities, 8));
    let {token, margin} = top2(out[out.length - 1].next.probabilities);
    const greedy = [], margins = [];
    for (let s = 0; s < opt.steps; s++) {
      greedy.push(token);
      margins.push(margin);
      const [o] = await seq.controlledEvaluate([[token, {generateNext: {probabilities: true}}]]);
      ({token, margin} = top2(o.next.probabilities));
    }
    cases.push({tokens: prompt, top_logprobs: top, greedy, greedy_margin: margins});
  }
  // Perplexity of the slice in one sequence, in pieces so that only one piece's probability
  // maps (a vocabulary each) are held at a time.
  await seq.clearHistory();
  let nll = 0;
  const piece = 64;
  for (let s = 0; s < pplIds.length; s += piece) {
    const ids = pplIds.slice(s, s + piece);
    const out = await seq.controlledEvaluate(
        ids.map((t, j) => (s + j + 1 < pplIds.length
                               ? [t, {generateNext: {probabilities: true}}] : t)));
    for (let j = 0; j < ids.length && s + j + 1 < pplIds.length; j++) {
      nll -= logp(out[j].next.probabilities.get(pplIds[s + j + 1]) ?? 0);
    }
  }
  await context.dispose();
  return {cases, ppl: Math.exp(nll / (pplIds.length - 1))};
}

let allOk = true;
const work = mkdtempSync(join(tmpdir(), "compare-arch-"));
for (const file of files) {
  const model = await llama.loadModel({modelPath: file});
  // Prompts: opt.prompts pieces of the tail, each cut to promptTokens tokens.
  const prompts = [];
  for (let i = 0; i < opt.prompts; i++) {
    const at = Math.floor((tail.length - 2000) * (i + 0.5) / opt.prompts);
    prompts.push(model.tokenize(tail.slice(at, at + 1000)).slice(0, opt.promptTokens));
  }
  const pplIds = model.tokenize(tail).slice(0, opt.pplTokens);
  const contextSize = Math.max(opt.pplTokens, opt.promptTokens + opt.steps + 1) + 16;
  const ref = await runLlama(model, prompts, pplIds, contextSize);
  await model.dispose();

  const input = join(work, "cases.json");
  writeFileSync(input, JSON.stringify({
    cases: ref.cases.map((c) => ({prompt: c.tokens, forced: c.greedy})), ppl: pplIds}));
  const ours = JSON.parse(execFileSync(opt.tarmac, [file, "--input", input, "--threads",
                                                    String(opt.threads), "--ctx",
                                                    String(contextSize)],
                                       {maxBuffer: 1 << 30}).toString());
  let agree = 0, nearTies = 0, disagree = 0, freeSame = 0, maxLp = 0, minMargin = Infinity;
  const failures = [];
  ref.cases.forEach((c, ci) => {
    const oc = ours.cases[ci];
    c.greedy.forEach((tok, s) => {
      const step = oc.forced[s];
      minMargin = Math.min(minMargin, c.greedy_margin[s]);
      if (step.ours === tok) agree++;
      else if (c.greedy_margin[s] <= opt.nearTie || step.gap <= opt.nearTie) nearTies++;
      else {
        disagree++;
        failures.push({case: ci, step: s, llama: tok, ours: step.ours,
                       llama_margin: c.greedy_margin[s], our_gap: step.gap});
      }
    });
    let n = 0;
    while (n < c.greedy.length && oc.free[n] === c.greedy[n]) n++;
    freeSame += n;
    // Prompt log-probabilities: llama.cpp's top-8 ids at each position, against ours.
    c.top_logprobs.forEach((top, p) => {
      const mine = new Map(oc.top_logprobs[p]);
      for (const [id, lp] of top) {
        if (mine.has(id)) maxLp = Math.max(maxLp, Math.abs(mine.get(id) - lp));
      }
    });
  });
  const pplDelta = (ours.ppl - ref.ppl) / ref.ppl;
  const ok = disagree === 0 && Math.abs(pplDelta) <= 0.005;
  allOk &&= ok;
  console.log(JSON.stringify({
    file, arch: ours.arch, steps: agree + nearTies + disagree, agree, near_ties: nearTies,
    disagree, free_running_identical: freeSame, min_llama_margin: minMargin,
    max_prompt_logprob_diff: maxLp, ppl_llama: ref.ppl, ppl_tarmac: ours.ppl,
    ppl_tokens: pplIds.length - 1, ppl_delta_pct: 100 * pplDelta, ok, failures}));
  if (opt.golden) {
    writeFileSync(opt.golden, JSON.stringify({
      source: "bench/compare_arch.sh: llama.cpp through node-llama-cpp 3.21.1 (CPU); " +
              "log-probabilities in nats",
      make_random: opt.makeRandom, context: contextSize,
      cases: ref.cases.map((c) => ({...c, top_logprobs: c.top_logprobs.map((t) => t.slice(0, 4))})),
      ppl: {tokens: pplIds, value: ref.ppl}}) + "\n");
  }
}
process.exit(allOk ? 0 : 1);
