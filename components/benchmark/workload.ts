// The benchmark's workload, pure: what is sent, not how. Two traps of a naive benchmark
// are avoided here by construction:
// - the prefix cache: every request (warm-up, measured, concurrent, retried) gets a document
//   of its own, and so does every run (a run's nonce is part of every seed: a re-run or a
//   repeated pass on the same server sends none of the prompts it has seen), so SGLang's radix
//   cache cannot turn a long-context prefill into a cache hit;
// - flattering speculation: documents are generated records that do not repeat (a sentence
//   repeated 2000 times is trivial to draft), and the questions ask about entries at the
//   start of the document, outside any drafter window, in three kinds (chat, code, maths).
// Lengths are in the server's own tokens: `charsPerToken` comes from one calibration
// request (run.ts), and every measured request's `prompt_tokens` is checked against it.
import { createHash } from "node:crypto";
import { prng } from "../../lib/prng";

/** The questions, by kind; a phase cycles through all of them. */
export const QUESTIONS: { kind: "chat" | "code" | "maths"; text: string }[] = [
  { kind: "chat", text: "Write a detailed briefing for a new harbour manager about the log above: what moved where, who inspected it, and which entries need follow-up." },
  { kind: "code", text: "Write a Python function, explained step by step, that parses entries like those in the log above into dictionaries and totals the crates per destination." },
  { kind: "maths", text: "Step by step, add up the crates recorded in the first three entries of the log above, then compute their mean and explain every step in detail." },
  { kind: "chat", text: "Explain in detail which vessel in the log above carried the most unusual cargo, quoting its entry number, and argue why." },
  { kind: "code", text: "Implement a program that finds, for a log like the one above, the inspector who signed the most entries; walk through the code in detail." },
  { kind: "maths", text: "Using the day numbers in the log above, compute step by step how many days passed between entry 1 and the last entry, and the average gap in detail." },
];

// Fillers: enough of each that a 6-word window of a document rarely repeats.
const NAMES = ["Amrita Koval", "Jonas Ferreira", "Li Wen", "Oskar Lind", "Fatima Haddad", "Mateo Ruiz", "Ingrid Sato", "Kwame Mensah", "Yara Costa", "Pavel Novak", "Elena Moreau", "Tariq Aziz", "Hana Kim", "Diego Alvarez", "Greta Holm", "Ravi Patel"];
const VESSELS = ["Teal Osprey", "Northern Lark", "Quiet Harbour", "Amber Tern", "Iron Gannet", "Saffron Wake", "Blue Petrel", "Cedar Finch", "Silver Heron", "Copper Swift", "Lantern Bay", "Frost Kestrel"];
const PORTS = ["Varnholm", "Lisbon", "Tromso", "Valparaiso", "Mombasa", "Busan", "Gdansk", "Halifax", "Durban", "Tallinn", "Antwerp", "Fremantle", "Manaus", "Reykjavik"];
const GOODS = ["copper wire", "olive oil", "ceramic tiles", "wool bales", "machine bearings", "coffee sacks", "glass bottles", "timber beams", "rice bags", "solar panels", "paper rolls", "tin ingots", "cotton thread", "salt blocks"];
const EVENTS = ["a damaged seal", "two missing manifests", "an early arrival", "a crane fault", "a customs query", "a cracked pallet", "a late pilot", "wet packaging", "a duplicated invoice", "a temperature alarm"];
const VERBS = ["loaded", "shipped", "moved", "carried", "sent", "hauled"];
const MOODS = ["Weather was calm", "Fog delayed the pilot", "A gale blew from the west", "Rain fell all morning", "The tide ran late", "Ice formed on the quay"];

/** The project's seeded PRNG over an FNV-1a hash of the seed, so documents are reproducible. */
function rng(seed: string): () => number {
  let h = 2166136261;
  for (let i = 0; i < seed.length; i++) h = Math.imul(h ^ seed.charCodeAt(i), 16777619);
  return prng(h >>> 0);
}

/**
 * One entry of a harbour log. Every few words carry a number drawn afresh (a count, a day, a
 * berth, a lot, an hour), and the order of clauses varies, so that no run of six words
 * recurs more than rarely, as in real prose.
 */
function entry(n: number, r: () => number): string {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const num = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo));
  const port = () => `${pick(PORTS)} berth ${num(1, 90)}`;
  const goods = () => `${num(20, 5000)} crates of ${pick(GOODS)} (lot ${num(100, 9999)})`;
  const who = () => `${pick(NAMES)} (badge ${num(10, 999)})`;
  const clauses = [
    () => `${pick(VESSELS)} ${pick(VERBS)} ${goods()} from ${port()} to ${port()}`,
    () => `${who()} noted ${pick(EVENTS)} at ${num(0, 24)}:${String(num(0, 60)).padStart(2, "0")}`,
    () => `${pick(MOODS).toLowerCase()} until ${num(0, 24)}:${String(num(0, 60)).padStart(2, "0")}, ${num(1, 12)} hours and ${num(1, 60)} minutes lost`,
    () => `${num(2, 40)} dockers worked ${num(1, 13)} shifts on ${goods()}`,
    () => `${pick(VESSELS)} waited ${num(1, 72)} hours at ${port()}`,
  ];
  const order = clauses.map((c) => ({ c, k: r() })).sort((a, b) => a.k - b.k).slice(0, 2 + Math.floor(r() * 3));
  return `Entry ${n}, day ${num(1, 366)}: ${order.map((o) => o.c()).join("; ")}.`;
}

/** Pure: a log of about `chars` characters, unique to `seed`. */
export function documentOf(chars: number, seed: string): string {
  const r = rng(seed);
  // A code unique to the seed comes first: prompts share no prefix beyond chance.
  const code = Array.from({ length: 12 }, () => "0123456789abcdefghijklmnopqrstuvwxyz"[Math.floor(r() * 36)]).join("");
  const out: string[] = [`${code}: harbour log.`];
  let length = out[0].length;
  for (let n = 1; length < chars; n++) {
    const e = entry(n, r);
    out.push(e);
    length += e.length + 1;
  }
  return out.join("\n").slice(0, Math.max(0, chars));
}

/**
 * Pure: a prompt of about `tokens` server tokens: a log unique to `seed`, then question
 * `index` (cycling through QUESTIONS). The question's own length is part of the total.
 */
export function promptOf(tokens: number, seed: string, index: number, charsPerToken: number): { text: string; kind: string } {
  const q = QUESTIONS[index % QUESTIONS.length];
  const question = `\n\n${q.text}`;
  const docChars = Math.max(0, Math.round(tokens * charsPerToken) - question.length);
  return { text: `${documentOf(docChars, seed)}${question}`, kind: q.kind };
}

/**
 * Pure: a run's prompt nonce, from what names the run (its stack, benchmark.runId and the
 * time it was taken): two runs of a stack, even with the same runId, differ by their time;
 * recorded in the result (prompt_nonce), it rebuilds the run's prompts.
 */
export function promptNonce(stack: string, runId: string, takenAt: string): string {
  return createHash("sha256").update(JSON.stringify([stack, runId, takenAt])).digest("hex").slice(0, 16);
}

/** What a phase is allowed to send, checked before it sends anything. */
export function checkFits(contextTokens: number, maxTokens: number, contextLength: number | undefined, key: string): void {
  if (contextLength === undefined) return;
  // SGLang refuses prompt + max_new_tokens >= context length (tokenizer_manager's
  // _validate_one_request); a prompt may come out up to lengthHeld's tolerance longer.
  if (contextTokens + lengthTolerance(contextTokens) + maxTokens >= contextLength) {
    throw new Error(
      `${key}: a prompt of ${contextTokens} tokens plus ${maxTokens} output tokens (benchmark.maxTokens) does not fit the server's context length of ${contextLength} tokens (with a 5% margin for prompts that come out longer); use prompt lengths up to ${Math.floor((contextLength - maxTokens - 1) / 1.05)} tokens`,
    );
  }
}

/** Pure: whether a measured prompt length is the length asked for (the calibration held). */
export function lengthHeld(asked: number, measured: number): boolean {
  return Math.abs(measured - asked) <= lengthTolerance(asked);
}

function lengthTolerance(asked: number): number {
  return Math.max(8, Math.ceil(asked * 0.05));
}
