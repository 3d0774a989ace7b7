// Measures llama.cpp (node-llama-cpp 3.21.1, CPU) serving many sequences at once: N requests,
// C in flight on C context sequences of one context (node-llama-cpp batches the sequences'
// evaluations together), each a P-token prompt of pseudo-random ids followed by O greedy
// tokens. Prints one JSON line:
//   {"file", "threads", "requests", "concurrency", "prompt_len", "output_len",
//    "output_tokens", "wall_s", "output_tokens_per_s"}
// Usage: node bench_parallel.mjs FILE [--threads T] [--requests N] [--concurrency C]
//        [--prompt-len P] [--output-len O]
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const argv = process.argv.slice(2);
const opt = {threads: 1, requests: 64, concurrency: 64, prompt: 128, output: 128};
let file = null;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--threads") opt.threads = Number(argv[++i]);
  else if (argv[i] === "--requests") opt.requests = Number(argv[++i]);
  else if (argv[i] === "--concurrency") opt.concurrency = Number(argv[++i]);
  else if (argv[i] === "--prompt-len") opt.prompt = Number(argv[++i]);
  else if (argv[i] === "--output-len") opt.output = Number(argv[++i]);
  else file = argv[i];
}
if (!file) {
  console.error("usage: node bench_parallel.mjs FILE [--threads T] [--requests N] [--concurrency C] [--prompt-len P] [--output-len O]");
  process.exit(2);
}

const llama = await getLlama({gpu: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: file});
const nVocab = model.tokens.nTokens ?? 2048;
const perSeq = opt.prompt + opt.output + 8;
const context = await model.createContext({
  sequences: opt.concurrency, contextSize: perSeq * opt.concurrency, threads: opt.threads,
  batchSize: Math.min(2048, perSeq * opt.concurrency),
});
let s = 12345;
const makePrompt = () => {
  const p = [];
  for (let i = 0; i < opt.prompt; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    p.push(256 + (s % Math.max(1, Math.min(nVocab, 2000) - 256)));
  }
  return p;
};
const prompts = Array.from({length: opt.requests}, makePrompt);
const sequences = Array.from({length: opt.concurrency}, () => context.getSequence());
let next = 0, outputTokens = 0;
async function worker(seq) {
  while (next < prompts.length) {
    const prompt = prompts[next++];
    await seq.clearHistory();
    let n = 0;
    for await (const token of seq.evaluate(prompt, {temperature: 0})) {
      ++outputTokens;
      if (++n >= opt.output) break;
    }
  }
}
const t0 = performance.now();
await Promise.all(sequences.map(worker));
const wall = (performance.now() - t0) / 1000;
console.log(JSON.stringify({
  file, threads: opt.threads, requests: opt.requests, concurrency: opt.concurrency,
  prompt_len: opt.prompt, output_len: opt.output, output_tokens: outputTokens, wall_s: wall,
  output_tokens_per_s: outputTokens / wall, context_size: context.contextSize,
}));
await context.dispose();
