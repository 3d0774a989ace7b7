// Measures llama.cpp (node-llama-cpp 3.21.1, CPU) on one GGUF: prefill of a P-token prompt and
// decode of N tokens at batch 1, greedy. Prints one JSON line:
//   {"file", "threads", "prefill_tokens", "prefill_tok_s", "decode_tokens", "decode_tok_s"}
// Usage: node bench_llamacpp.mjs FILE [--threads T] [--prompt-tokens P] [--decode N] [--reps R]
// Each figure is the median of R repetitions (fresh context each time).
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const argv = process.argv.slice(2);
const opt = {threads: 1, prompt: 512, decode: 128, reps: 3};
let file = null;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--threads") opt.threads = Number(argv[++i]);
  else if (argv[i] === "--prompt-tokens") opt.prompt = Number(argv[++i]);
  else if (argv[i] === "--decode") opt.decode = Number(argv[++i]);
  else if (argv[i] === "--reps") opt.reps = Number(argv[++i]);
  else file = argv[i];
}
if (!file) {
  console.error("usage: node bench_llamacpp.mjs FILE [--threads T] [--prompt-tokens P] [--decode N] [--reps R]");
  process.exit(2);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const llama = await getLlama({gpu: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: file});
const nVocab = model.tokens.nTokens ?? 2048;
// A deterministic pseudo-random prompt of token ids (avoids tokenizer differences).
const prompt = [];
let s = 12345;
for (let i = 0; i < opt.prompt; i++) {
  s = (s * 1103515245 + 12345) % 2147483648;
  prompt.push(256 + (s % Math.max(1, Math.min(nVocab, 2000) - 256)));
}
const prefill = [], decode = [];
for (let r = 0; r < opt.reps; r++) {
  const context = await model.createContext({
    contextSize: opt.prompt + opt.decode + 16, threads: opt.threads, batchSize: opt.prompt,
  });
  const seq = context.getSequence();
  // Prefill: evaluate the prompt without generating.
  let t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(prompt);
  let t1 = performance.now();
  prefill.push(opt.prompt / ((t1 - t0) / 1000));
  // Decode: greedy tokens one at a time from a 1-token start in a fresh sequence state.
  await seq.clearHistory();
  const start = [prompt[0]];
  let n = 0;
  t0 = performance.now();
  let first = 0;
  for await (const token of seq.evaluate(start, {temperature: 0})) {
    if (n === 0) first = performance.now();
    if (++n > opt.decode) break;
  }
  t1 = performance.now();
  // The first token comes from evaluating `start`; count the decode steps after it.
  decode.push(opt.decode / ((t1 - first) / 1000));
  await context.dispose();
}
console.log(JSON.stringify({
  file, threads: opt.threads, prefill_tokens: opt.prompt, prefill_tok_s: median(prefill),
  decode_tokens: opt.decode, decode_tok_s: median(decode),
}));
