// The coding-correctness check: a few small programming tasks with tests. Thinking
// models put a reasoning block before the answer and fence code in varying ways, so
// extraction is its own pure, tested step; the model's code runs in a bubblewrap sandbox
// (no network, nothing of the file system but /usr and its own scratch folder, resource
// and time limits). Extraction failures and test failures are counted separately.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export interface CodingTask {
  id: string;
  /** Name of the Python function the answer must define. */
  entryPoint: string;
  prompt: string;
  /** Python statements that raise AssertionError on a wrong answer. */
  tests: string;
}

export const CODING_TASKS: CodingTask[] = [
  {
    id: "fizzbuzz",
    entryPoint: "fizzbuzz",
    prompt: "Write a Python function `def fizzbuzz(n)` that returns a list of strings for 1..n: 'Fizz' for multiples of 3, 'Buzz' for multiples of 5, 'FizzBuzz' for both, else the number as a string.",
    tests: "assert fizzbuzz(5) == ['1', '2', 'Fizz', '4', 'Buzz']\nassert fizzbuzz(15)[-1] == 'FizzBuzz'\nassert fizzbuzz(0) == []",
  },
  {
    id: "is_palindrome",
    entryPoint: "is_palindrome",
    prompt: "Write a Python function `def is_palindrome(s)` that returns True if s reads the same backwards ignoring case and non-alphanumeric characters.",
    tests: "assert is_palindrome('A man, a plan, a canal: Panama')\nassert not is_palindrome('race a car')\nassert is_palindrome('')",
  },
  {
    id: "two_sum",
    entryPoint: "two_sum",
    prompt: "Write a Python function `def two_sum(nums, target)` that returns the indices [i, j] (i < j) of the two numbers that add up to target, or None.",
    tests: "assert two_sum([2, 7, 11, 15], 9) == [0, 1]\nassert two_sum([3, 2, 4], 6) == [1, 2]\nassert two_sum([1, 2], 7) is None",
  },
  {
    id: "run_length",
    entryPoint: "run_length",
    prompt: "Write a Python function `def run_length(s)` that run-length encodes a string: 'aaabcc' -> 'a3b1c2'.",
    tests: "assert run_length('aaabcc') == 'a3b1c2'\nassert run_length('') == ''\nassert run_length('z') == 'z1'",
  },
  {
    id: "merge_intervals",
    entryPoint: "merge_intervals",
    prompt: "Write a Python function `def merge_intervals(xs)` that merges overlapping [start, end] intervals and returns them sorted by start.",
    tests: "assert merge_intervals([[1, 3], [2, 6], [8, 10]]) == [[1, 6], [8, 10]]\nassert merge_intervals([]) == []\nassert merge_intervals([[5, 6], [1, 5]]) == [[1, 6]]",
  },
];

/**
 * Pure: the code of an answer. Skips reasoning blocks (<think>...</think>, also an
 * unclosed one up to the first fence), prefers the last fenced block that defines the
 * entry point (any fence language, ``` or ~~~), then any fenced block, then unfenced
 * text that starts at a `def`/`import`. Undefined when nothing looks like code.
 */
export function extractCode(answer: string, entryPoint?: string): string | undefined {
  let text = answer.replace(/<think>[\s\S]*?<\/think>/gi, "");
  const unclosed = text.search(/<think>/i);
  if (unclosed >= 0) {
    const fence = text.slice(unclosed).search(/^(```|~~~)/m);
    text = fence >= 0 ? text.slice(0, unclosed) + text.slice(unclosed + fence) : text.slice(0, unclosed);
  }
  const blocks: string[] = [];
  const fenceRe = /^(```|~~~)[ \t]*([\w+#.-]*)[^\n]*\n([\s\S]*?)^\1[ \t]*$/gm;
  for (let m = fenceRe.exec(text); m; m = fenceRe.exec(text)) {
    const lang = m[2].toLowerCase();
    if (lang === "" || lang === "python" || lang === "py" || lang === "python3") blocks.push(m[3]);
  }
  const defines = (code: string) => entryPoint === undefined || new RegExp(`^\\s*def\\s+${entryPoint}\\s*\\(`, "m").test(code);
  const fenced = [...blocks].reverse().find(defines) ?? blocks[blocks.length - 1];
  if (fenced !== undefined) return fenced.trimEnd() + "\n";
  const start = text.search(/^(def |import |from \w+ import |class )/m);
  if (start < 0) return undefined;
  return text.slice(start).trimEnd() + "\n";
}

export type CodingOutcome = "pass" | "fail" | "extraction-failed" | "timeout";

/** What the model's code may use: address space, CPU seconds, processes, file size. */
export const SANDBOX_LIMITS = { addressSpaceBytes: 2 * 1024 ** 3, processes: 64, fileBytes: 16 * 1024 ** 2 };

/**
 * The command that runs `argv` in a sandbox with `dir` as its only writable folder
 * (bubblewrap, Debian package `bubblewrap`): new user (uid nobody), network, PID, IPC and
 * UTS namespaces; a read-only /usr (and the /bin, /lib... links or folders the host has)
 * and nothing else of the host (no home, no /etc, no keys); limits by prlimit.
 */
export function sandboxArgv(dir: string, cpuSeconds: number, argv: string[]): string[] {
  const top = ["bin", "lib", "lib64", "lib32", "sbin"].flatMap((d) => {
    const p = `/${d}`;
    if (!fs.existsSync(p)) return [];
    const st = fs.lstatSync(p);
    return st.isSymbolicLink() ? ["--symlink", fs.readlinkSync(p), p] : ["--ro-bind", p, p];
  });
  const l = SANDBOX_LIMITS;
  return [
    "bwrap", "--ro-bind", "/usr", "/usr", ...top,
    "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", dir, "/work", "--chdir", "/work",
    "--unshare-all", "--uid", "65534", "--gid", "65534", "--die-with-parent", "--new-session",
    "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work",
    "--", "prlimit", `--as=${l.addressSpaceBytes}`, `--cpu=${cpuSeconds}`, `--nproc=${l.processes}`, `--fsize=${l.fileBytes}`, "--", ...argv,
  ];
}

/** Why the sandbox cannot run here, or undefined when it can. */
export function sandboxMissing(): string | undefined {
  const r = spawnSync("bwrap", ["--version"], { encoding: "utf8" });
  if (r.error || r.status !== 0) return "the coding check runs model-written code only inside a bubblewrap sandbox, and `bwrap` is not available: install it (Debian: apt-get install bubblewrap) or set dflash-sglang:benchmark.coding to false";
  return undefined;
}

/**
 * Runs `code` plus `tests` with python3 in isolated mode (-I -S) inside the sandbox, in a
 * fresh temp folder, with a time limit (wall clock here, CPU seconds in the sandbox).
 */
export function runPythonTests(code: string, tests: string, timeoutMs = 10_000): { outcome: "pass" | "fail" | "timeout"; detail: string } {
  const missing = sandboxMissing();
  if (missing) throw new Error(missing);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-coding-"));
  try {
    fs.writeFileSync(path.join(dir, "answer.py"), `${code}\n\n${tests}\n`);
    const [cmd, ...args] = sandboxArgv(dir, Math.ceil(timeoutMs / 1000) + 1, ["python3", "-I", "-S", "answer.py"]);
    const r = spawnSync(cmd, args, { env: { PATH: "/usr/bin:/bin" }, timeout: timeoutMs, killSignal: "SIGKILL", encoding: "utf8", maxBuffer: 1024 * 1024 });
    if (r.error && (r.error as NodeJS.ErrnoException).code === "ETIMEDOUT") return { outcome: "timeout", detail: `over ${timeoutMs} ms` };
    if (r.status === 0) return { outcome: "pass", detail: "" };
    return { outcome: "fail", detail: (r.stderr || r.stdout || `exit ${r.status}`).trim().split("\n").slice(-1)[0] };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether an answer of the model passes a task: extraction, then the tests in a subprocess. */
export function gradeAnswer(task: CodingTask, answer: string, timeoutMs?: number): { outcome: CodingOutcome; detail: string } {
  const code = extractCode(answer, task.entryPoint);
  if (code === undefined) return { outcome: "extraction-failed", detail: "no code found in the answer" };
  return runPythonTests(code, task.tests, timeoutMs);
}
