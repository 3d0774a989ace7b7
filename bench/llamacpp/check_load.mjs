// Loads each GGUF file with llama.cpp (through node-llama-cpp 3.21.1, CPU only): tokenizes a
// string, evaluates it and draws a few greedy tokens; prints "OK <file> ..." or
// "FAIL <file>: <error>" per file.
//
// Usage: node check_load.mjs [--ppl TEXT_FILE [--tokens N]] FILE...
//   --ppl: also score the first N (default 256) tokens of TEXT_FILE with each model (which must
//          share one vocabulary, e.g. a model and its quantized versions): perplexity, and
//          agreement of the argmax next token and mean KL divergence against the FIRST file.
//          A quantized file whose blocks llama.cpp decoded differently from how we encoded them
//          shows up as a perplexity far above the original's.
// Exit code: 0 if every file loaded and evaluated, 1 otherwise, 2 on bad usage.
import {readFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const argv = process.argv.slice(2);
let pplFile = null;
let nTokens = 256;
const files = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--ppl") pplFile = argv[++i];
  else if (argv[i] === "--tokens") nTokens = Number(argv[++i]);
  else files.push(argv[i]);
}
if (files.length === 0 || (pplFile !== null && !pplFile) || !(nTokens > 1)) {
  console.error("usage: node check_load.mjs [--ppl TEXT_FILE [--tokens N]] FILE...");
  process.exit(2);
}

const llama = await getLlama({gpu: false, logLevel: LlamaLogLevel.error});
const prompt = "The old prince was sitting in his study.";
const text = pplFile ? readFileSync(pplFile, "utf8").slice(0, 200000) : null;

// Probabilities of every next token at each position of `tokens` (array of Map id -> p).
async function nextTokenProbs(model, tokens) {
  const context = await model.createContext({contextSize: Math.max(256, tokens.length + 8)});
  const seq = context.getSequence();
  const input = tokens.map((t) => [t, {generateNext: {probabilities: true}}]);
  const out = await seq.controlledEvaluate(input);
  const probs = out.map((o) => o?.next?.probabilities ?? new Map());
  await context.dispose();
  return probs;
}

let failed = 0;
let ref = null;  // {tokens, probs} of the first file
for (const file of files) {
  try {
    const model = await llama.loadModel({modelPath: file});
    const context = await model.createContext({contextSize: 128});
    const sequence = context.getSequence();
    const tokens = model.tokenize(prompt);
    if (tokens.length === 0) throw new Error("tokenize returned no tokens");
    const roundTrip = model.detokenize(tokens) === prompt ? "exact" : "DIFFERS";
    const generated = [];
    for await (const token of sequence.evaluate(tokens, {temperature: 0})) {
      generated.push(token);
      if (generated.length >= 4) break;
    }
    await context.dispose();
    let extra = "";
    if (text !== null) {
      const toks = model.tokenize(text).slice(0, nTokens);
      const probs = await nextTokenProbs(model, toks);
      let nll = 0, agree = 0, kl = 0;
      for (let i = 0; i + 1 < toks.length; i++) {
        const p = probs[i].get(toks[i + 1]) ?? 1e-30;
        nll -= Math.log(Math.max(p, 1e-30));
        if (ref) {
          const argmax = (m) => [...m.entries()].reduce((a, b) => (b[1] > a[1] ? b : a))[0];
          if (argmax(probs[i]) === argmax(ref.probs[i])) agree++;
          for (const [id, pr] of ref.probs[i]) {
            if (pr > 0) kl += pr * Math.log(pr / Math.max(probs[i].get(id) ?? 0, 1e-30));
          }
        }
      }
      const n = toks.length - 1;
      extra = `, ppl ${Math.exp(nll / n).toFixed(3)} over ${n} tokens`;
      if (ref) {
        extra += `, argmax agreement with ${files[0].split("/").pop()} ${(100 * agree / n).toFixed(1)}%` +
                 `, mean KL ${(kl / n).toFixed(5)}`;
      } else {
        ref = {tokens: toks, probs};
      }
    }
    console.log(`OK ${file}: ${tokens.length} prompt tokens, detokenize ${roundTrip}, ` +
                `greedy [${generated.join(", ")}]${extra}`);
    await model.dispose();
  } catch (e) {
    failed++;
    console.log(`FAIL ${file}: ${e?.message ?? e}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
