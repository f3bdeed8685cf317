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
