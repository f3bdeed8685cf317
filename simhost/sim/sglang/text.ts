// Deterministic answers of the simulated model, split into tokens. Coding prompts get
// what a thinking model writes: a reasoning block, then a fenced code block. Every answer
// has a natural length, where the model emits EOS; SGLang stops there unless the request
// sets ignore_eos (srt/managers/schedule_batch.py, Req.check_finished: max_new_tokens
// first, then the stop token unless sampling_params.ignore_eos).

const WORDS = ("the model drafts a block of tokens and the target verifies them in one pass so accepted " +
  "tokens arrive several at a time while rejected ones are drafted again from the first mismatch").split(" ");

const CODE_HINT = /\b(code|python|function|implement|program|def)\b/i;

function hash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

/**
 * What the simulated model "knows": working solutions to a few classic exercises (so a
 * coding check has something to pass), in varying fence styles (so extraction is
 * exercised). Anything else gets a stub that fails its tests.
 */
const KNOWN_SOLUTIONS: Record<string, { fence: string; code: string }> = {
  fizzbuzz: {
    fence: "```python",
    code: `def fizzbuzz(n):
    out = []
    for i in range(1, n + 1):
        word = ("Fizz" if i % 3 == 0 else "") + ("Buzz" if i % 5 == 0 else "")
        out.append(word or str(i))
    return out`,
  },
  is_palindrome: {
    fence: "```py",
    code: `def is_palindrome(s):
    kept = [c.lower() for c in s if c.isalnum()]
    return kept == kept[::-1]`,
  },
  two_sum: {
    fence: "~~~python",
    code: `def two_sum(nums, target):
    seen = {}
    for j, x in enumerate(nums):
        if target - x in seen:
            return [seen[target - x], j]
        seen[x] = j
    return None`,
  },
  run_length: {
    fence: "```",
    code: `def run_length(s):
    out = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(s[i] + str(j - i))
        i = j
    return "".join(out)`,
  },
  merge_intervals: {
    fence: "```python3",
    code: `def merge_intervals(xs):
    merged = []
    for a, b in sorted(xs):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged`,
  },
};

function codingAnswer(prompt: string): string {
  const name = /\bdef\s+([A-Za-z_]\w*)/.exec(prompt)?.[1] ?? /`([A-Za-z_]\w*)`/.exec(prompt)?.[1] ?? "solve";
  const known = KNOWN_SOLUTIONS[name];
  const fence = known?.fence ?? "```python";
  const close = fence.startsWith("~~~") ? "~~~" : "```";
  return [
    "<think>",
    `The user wants ${name}. A first idea in a scratch block:`,
    "```python",
    `# draft of ${name}, not final`,
    "```",
    "I will write the final version now.",
    "</think>",
    "",
    "Here is the implementation:",
    "",
    fence,
    known?.code ?? `def ${name}(*args):\n    raise NotImplementedError`,
    close,
    "",
  ].join("\n");
}

/** Prompts that ask for a long answer: the model writes until its length budget. */
const LONG_ANSWER_HINT = /\b(in detail|detailed|at length|step[ -]by[ -]step|essays?)\b/i;
const LONG_ANSWER_TOKENS = 4096;

export interface Completion {
  tokens: string[];
  /** How many tokens the model writes before its EOS; tokens from here on are post-EOS. */
  naturalEnd: number;
  finishReason: "stop" | "length";
}

/**
 * Pure: the answer to `prompt`. The model stops at its natural end ("stop") unless
 * `maxTokens` comes first ("length"); with `ignoreEos` it always writes `maxTokens`
 * tokens ("length"), those past `naturalEnd` being what it writes after its EOS.
 * The natural end: after the code for a coding prompt; 4096 tokens for a prompt that asks
 * for a long answer; else 48 to 207 tokens, by the prompt's hash.
 */
export function completionText(prompt: string, maxTokens: number, corrupt: boolean, ignoreEos = false): Completion {
  const limit = Math.max(1, Math.floor(maxTokens));
  const answer = CODE_HINT.test(prompt) ? (codingAnswer(prompt).match(/\s*\S+|\s+/g) ?? []) : [];
  const naturalEnd = answer.length > 0 ? answer.length : LONG_ANSWER_HINT.test(prompt) ? LONG_ANSWER_TOKENS : 48 + (hash(prompt) % 160);
  const stops = !ignoreEos && naturalEnd < limit;
  const n = stops ? naturalEnd : limit;
  const finishReason = stops ? "stop" : "length";
  if (corrupt) return { tokens: Array.from({ length: n }, (_, i) => String.fromCharCode(0xfffd, 0x1 + (i % 7))), naturalEnd, finishReason };
  const tokens = answer.slice(0, n);
  let h = hash(prompt);
  while (tokens.length < n) {
    h = Math.imul(h ^ (h >>> 15), 2246822507) >>> 0;
    tokens.push((tokens.length === 0 ? "" : " ") + WORDS[h % WORDS.length]);
  }
  return { tokens, naturalEnd, finishReason };
}
