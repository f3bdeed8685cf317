// Deterministic answers of the simulated model, split into tokens. Coding prompts get
// what a thinking model writes: a reasoning block, then a fenced code block.

const WORDS = ("the model drafts a block of tokens and the target verifies them in one pass so accepted " +
  "tokens arrive several at a time while rejected ones are drafted again from the first mismatch").split(" ");

const CODE_HINT = /\b(code|python|function|implement|program|def)\b/i;

function hash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

function codingAnswer(prompt: string): string {
  const name = /\bdef\s+([A-Za-z_]\w*)/.exec(prompt)?.[1] ?? /`([A-Za-z_]\w*)`/.exec(prompt)?.[1] ?? "solve";
  return [
    "<think>",
    `The user wants ${name}. I will write it in Python and keep it short.`,
    "</think>",
    "",
    "Here is the implementation:",
    "",
    "```python",
    `def ${name}(*args):`,
    "    raise NotImplementedError",
    "```",
    "",
  ].join("\n");
}

/** Pure: the answer to `prompt` as exactly `maxTokens` tokens (the simulator never stops early). */
export function completionText(prompt: string, maxTokens: number, corrupt: boolean): string[] {
  const n = Math.max(1, Math.floor(maxTokens));
  if (corrupt) return Array.from({ length: n }, (_, i) => String.fromCharCode(0xfffd, 0x1 + (i % 7)));
  const tokens: string[] = [];
  if (CODE_HINT.test(prompt)) {
    for (const piece of codingAnswer(prompt).match(/\s*\S+|\s+/g) ?? []) tokens.push(piece);
  }
  let h = hash(prompt);
  while (tokens.length < n) {
    h = Math.imul(h ^ (h >>> 15), 2246822507) >>> 0;
    tokens.push((tokens.length === 0 ? "" : " ") + WORDS[h % WORDS.length]);
  }
  return tokens.slice(0, n);
}
