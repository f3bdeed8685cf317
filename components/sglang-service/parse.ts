// Pure parsers of what hosts print, for the readiness provider: `systemctl show`,
// `ss -ltnp`, curl status lines, and the cause of a failed start in a journal. (The
// transaction reads nvidia-smi and SGLang's drain lines itself, in bash: script.ts.)

/** `systemctl show -p A -p B UNIT` -> { A: "...", B: "..." }. */
export function parseSystemctlShow(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return out;
}

export interface UnitState {
  activeState: string;
  subState: string;
  mainPid: number;
  nRestarts: number;
  execMainStatus: number;
  /** Microseconds since epoch when the unit last entered "activating"/"active", 0 if never. */
  execMainStartTimestampMonotonic: number;
  loadState: string;
}

export function unitState(show: Record<string, string>): UnitState {
  const n = (k: string) => Number(show[k] ?? 0) || 0;
  return {
    activeState: show.ActiveState ?? "unknown",
    subState: show.SubState ?? "unknown",
    mainPid: n("MainPID"),
    nRestarts: n("NRestarts"),
    execMainStatus: n("ExecMainStatus"),
    execMainStartTimestampMonotonic: n("ExecMainStartTimestampMonotonic"),
    loadState: show.LoadState ?? "unknown",
  };
}

/** `ss -ltnpH` lines -> PIDs listening on `port`. */
export function listenerPids(ssOutput: string, port: number): number[] {
  const pids = new Set<number>();
  for (const line of ssOutput.split("\n")) {
    const cols = line.trim().split(/\s+/);
    const local = cols[3] ?? "";
    if (!local.endsWith(`:${port}`)) continue;
    for (const m of line.matchAll(/pid=(\d+)/g)) pids.add(Number(m[1]));
  }
  return [...pids].sort((a, b) => a - b);
}

/**
 * Pure: host/ready-probe.sh's age line, "<host clock> <main process's age>", both in seconds
 * (to a hundredth): when the main process started on the host's clock, and its age to a tenth
 * of a second; nothing when either is missing or not a number (no main process, a read that
 * failed).
 */
export function parseMainAge(line: string | undefined): { mainStartedAt: number; mainAgeSeconds: number } | Record<string, never> {
  const words = (line ?? "").trim().split(/\s+/);
  if (words.length !== 2 || !words.every((w) => /^\d+(\.\d+)?$/.test(w))) return {};
  const [now, age] = words.map(Number);
  return now > 0 ? { mainStartedAt: now - age, mainAgeSeconds: Math.round(age * 10) / 10 } : {};
}

/** Splits output made of `@@section NAME` markers into named parts. */
export function splitSections(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  let name = "";
  let acc: string[] = [];
  for (const line of text.split("\n")) {
    const m = /^@@section (\S+)$/.exec(line);
    if (m) {
      if (name) out[name] = acc.join("\n");
      name = m[1];
      acc = [];
    } else {
      acc.push(line);
    }
  }
  if (name) out[name] = acc.join("\n");
  return out;
}

/** One line of a unit's journal: its text, and when `-o short-monotonic` printed one, the host's monotonic clock then (seconds since boot). */
export interface JournalLine {
  text: string;
  monotonic?: number;
}

/**
 * Pure: journal text -> its lines, without journalctl's prefix. Takes `-o cat` (no prefix), the
 * default short format ("Nov 29 08:31:11 host python3[123]: ...") and `-o short-monotonic`
 * ("[ 1234.567890] host python3[123]: ...", whose clock it keeps: durations between lines that a
 * step of the wall clock cannot bend).
 */
export function journalLines(journal: string): JournalLine[] {
  const out: JournalLine[] = [];
  for (const raw of journal.split("\n")) {
    const mono = /^\[\s*(\d+\.\d+)\] \S+ [^\s:]+(?:\[\d+\])?: ?/.exec(raw);
    const text = (mono ? raw.slice(mono[0].length) : raw.replace(/^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:]+(\[\d+\])?: /, "")).trim();
    if (text) out.push(mono ? { text, monotonic: Number(mono[1]) } : { text });
  }
  return out;
}

/** srt/entrypoints/http_server.py (_wait_and_warmup): the line SGLang logs once its warm-up request answered. */
export const READY_LINE = "The server is fired up and ready to roll!";

/**
 * Pure: where a start had got to by the host's own evidence, its journal, whatever the tool's
 * last look saw (on a loaded machine a server can become ready, and die, between two looks).
 * `polled` is the tool's phase from its last look; a phase later than it, read in the journal
 * (SGLang's ready line, then uvicorn's "Uvicorn running on": the port open, then "Load weight
 * begin"), replaces it. Phases the journal cannot show (a GPU wait, a port held by another
 * process, other arguments, the generation check, the stability window) are kept.
 */
export function phaseFromEvidence(polled: string, lines: JournalLine[]): string {
  const polledRank = /^(starting|waiting for GPUs)/.test(polled) ? 0 : /^loading weights/.test(polled) ? 1 : /^warming up/.test(polled) ? 2 : 3;
  const lastIndex = (re: RegExp) => {
    for (let i = lines.length - 1; i >= 0; i--) if (re.test(lines[i].text)) return i;
    return -1;
  };
  const ready = lastIndex(/The server is fired up and ready to roll!/);
  if (ready >= 0 && polledRank < 3) {
    const at = lines[ready].monotonic;
    const last = [...lines].reverse().find((l) => l.monotonic !== undefined)?.monotonic;
    const after = at !== undefined && last !== undefined ? `${(last - at).toFixed(1)} s ` : "";
    return `serving, ${after}after becoming ready (SGLang logged "${READY_LINE}"; the tool had not yet proved it)`;
  }
  if (lastIndex(/Uvicorn running on /) >= 0 && polledRank < 2) return "warming up (SGLang's port had opened: uvicorn's \"Uvicorn running on\")";
  if (lastIndex(/Load weight begin/) >= 0 && polledRank < 1) return "loading weights (SGLang logged \"Load weight begin\")";
  return polled;
}

/**
 * Pure: the block of the first scheduler exception (from "Scheduler hit an exception" to the
 * traceback's last line, the exception), or nothing. With tensor parallelism every rank prints
 * its own traceback, then the main process its SIGQUIT line and NCCL its warnings: the first
 * rank's exception is the cause, the rest its consequences.
 */
function firstSchedulerException(lines: string[]): string[] | undefined {
  const start = lines.findIndex((l) => /Scheduler hit an exception/.test(l));
  if (start < 0) return undefined;
  const end = lines.findIndex((l, i) => i > start && /^[A-Za-z_.]*(Error|Exception): /.test(l));
  return end < 0 ? undefined : lines.slice(start, end + 1);
}

/** What to do when the CUDA graph capture does not fit. */
const GRAPH_ADVICE = "lower model.memFractionStatic or add --cuda-graph-max-bs with a smaller batch to model.extraArgs";

/**
 * Pure: the journal's lines that hold the cause when they are not among its last `tail` lines:
 * the first scheduler exception's first line and its last `keep` lines (with TP 8 the other
 * ranks' tracebacks, SIGQUIT and NCCL lines follow it); nothing otherwise.
 */
export function causeExcerpt(lines: string[], tail: number, keep = 3): string[] {
  const first = firstSchedulerException(lines);
  if (!first) return [];
  const end = lines.indexOf(first[first.length - 1], lines.indexOf(first[0]));
  if (end >= lines.length - tail) return [];
  return first.length <= keep + 1 ? first : [first[0], "...", ...first.slice(-keep)];
}

/** The most telling line of a failed start, in words a user acts on. */
export function failureCause(journal: string): string | undefined {
  const all = journalLines(journal).map((l) => l.text);
  // A scheduler's crash: its own traceback first (the TP ranks after it print theirs, NCCL its aborts).
  const first = firstSchedulerException(all);
  if (first) return causeOf(first) ?? first[first.length - 1];
  return causeOf(all);
}

function causeOf(lines: string[]): string | undefined {
  const find = (re: RegExp) => {
    for (let i = lines.length - 1; i >= 0; i--) {
      const m = re.exec(lines[i]);
      if (m) return m;
    }
    return undefined;
  };
  // The three ways SGLang reports GPU memory it cannot have (model_runner.py and the
  // memory pool set-up): torch's own OOM, "Not enough memory", "unbalanced".
  // "Unbalanced" is fatal by default (SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK) and a warning when
  // the check is switched off; a warning followed by running out of memory names it first (the
  // cause is the GPUs another process holds, not the model's size); followed by anything else,
  // the later error is the cause.
  // cuda_graph_runner.py: the capture needs memory beyond the weights and KV cache; its message
  // wraps torch's own out-of-memory text ("GPU N has a total capacity"), so it is read first.
  const graph = find(/Capture cuda graph failed: (.*)$/);
  if (graph) return `CUDA graph capture failed (${graph[1].trim()}); ${GRAPH_ADVICE}`;
  const oom = find(/CUDA out of memory.*?GPU (\d+)/);
  const pool = find(/Not enough memory\. Please try to increase --mem-fraction-static\.?(.*)$/);
  const unbalanced = find(/memory capacity is unbalanced\. Some GPUs may be occupied by other processes\.?\s*(.*)$/);
  const unbalancedCause = unbalanced && `out of GPU memory: some GPUs have much less free memory than others, probably held by other processes (SGLang: "The memory capacity is unbalanced"${unbalanced[1] ? `; ${unbalanced[1]}` : ""})`;
  if (unbalancedCause && oom) return `${unbalancedCause}, then CUDA out of memory on GPU ${oom[1]}`;
  if (unbalancedCause && pool) return `${unbalancedCause}, then no room left for the KV cache`;
  if (oom) return `CUDA out of memory on GPU ${oom[1]} (${oom.input.replace(/^.*?CUDA out of memory\.\s*/, "")})`;
  if (pool) return `out of GPU memory: no room left for the KV cache after the weights (SGLang: "Not enough memory. Please try to increase --mem-fraction-static"${pool[1].trim() ? `; ${pool[1].trim()}` : ""}); check nvidia-smi for other processes holding GPU memory, or raise model.memFractionStatic`;
  if (unbalancedCause) return unbalancedCause;
  // spec_info.py: ValueError (v0.5.17 on); KeyError in older releases.
  const algorithm = find(/Unknown speculative algorithm name:? *'?([\w-]*)'?/);
  if (algorithm) return `the installed SGLang does not know the speculative algorithm ${algorithm[1]}: check speculative.algorithm and sglangBuild`;
  // server_args_config_parser.py (sgl-project/sglang#36326): a --config key with a deprecated alias.
  const configOption = find(/Unsupported config option '([^']+)' with action/);
  if (configOption) return `SGLang refused the key ${configOption[1]} in its --config file (a field with a deprecated alias: sgl-project/sglang#36326); pass it as a flag in model.extraArgs instead`;
  // argparse of `sglang serve` (older builds: launch_server.py): exit 2 before anything loads.
  const unrecognized = find(/error: unrecognized arguments: (.*)$/);
  if (unrecognized) return `the installed SGLang does not accept: ${unrecognized[1]}`;
  const argError = find(/^(?:sglang serve|[\w.-]+\.py): error: (.*)$/);
  if (argError) return `SGLang rejected its arguments: ${argError[1]}`;
  const exc = find(/^([A-Za-z_.]*(Error|Exception)): (.*)$/);
  if (exc) return exc[0];
  const gpuWait = find(/GPU memory still in use after .*$/);
  if (gpuWait) return gpuWait[0];
  const gate = find(/^(\S+) not ready after (\d+)s/);
  if (gate) return `the unit's readiness gate gave up: ${gate[1]} not ready after ${gate[2]} s`;
  return undefined;
}

/** `curl -s -w '\n@@status %{http_code}'` output -> body and HTTP status (0: no answer). */
export function parseCurlWithStatus(text: string): { body: string; status: number } {
  const m = /\n?@@status (\d{3})\s*$/.exec(text);
  if (!m) return { body: text, status: 0 };
  return { body: text.slice(0, m.index), status: Number(m[1]) };
}

/**
 * Server arguments that /server_info reports and are safe to keep (in state, outputs,
 * benchmark files): the ones our readiness compares, plus the speculative settings and
 * a few more that describe the configuration. Everything else is dropped: the body holds
 * api_key, admin_api_key and ssl_keyfile_password in clear (sgl-project/sglang issue #37457).
 */
export const DESCRIPTIVE_SERVER_ARGS = ["context_length", "mem_fraction_static", "quantization", "served_model_name", "version"] as const;

export function publicServerArgs(info: Record<string, unknown>, compared: string[]): Record<string, unknown> {
  const speculative = Object.keys(info).filter((k) => k.startsWith("speculative_"));
  const keys = [...new Set([...compared, ...DESCRIPTIVE_SERVER_ARGS, ...speculative])].filter((k) => !SECRET_ARG.test(k) && k in info).sort();
  return Object.fromEntries(keys.map((k) => [k, info[k]]));
}

const SECRET_ARG = /(^|_)(api_key|password|token|secret)$/;

/** A quoted value (either quote, escapes kept) or a bare word, as SGLang prints argument values. */
const VALUE = String.raw`'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"`;
const SECRET_NAME = String.raw`\w*(?:api_key|password|token|secret)`;
const SECRET_FLAG = String.raw`--[\w-]*(?:api-key|password|token|secret)`;

/**
 * Masks what looks like a secret in text shown to users (journal lines in errors). SGLang logs
 * its start-up arguments with the API key in clear (sglang-facts.md, Start-up), in three forms:
 * releases `server_args=ServerArgs(api_key='...')`, main a dict `server_args={'api_key': '...'}`
 * (and JSON `"api_key": "..."` where it is dumped so), and the joined argv of `launch_command`
 * (`--api-key sk-...`). Also bearer tokens and Hugging Face tokens. `None` / `null` stay.
 */
export function redactSecrets(text: string): string {
  const kept = (v: string) => v === "None" || v === "null";
  // First, on the text as it came: a secret flag that ends its line with a continuation
  // (a unit's `--api-key \`), its value the first word of the next line. The rewrites below
  // must not run before it: the flag's rule would read the lone backslash as its value.
  // Lines between them that carry no word (a bare `\`, blank, or a comment, which systemd
  // allows inside a continuation) are passed over: the value is the next word on a line.
  const lines = text.split("\n");
  let pending = false;
  for (let i = 0; i < lines.length; i++) {
    if (pending && !/^\s*[-+]?\s*(\\?\s*$|[#;])/.test(lines[i])) {
      lines[i] = lines[i].replace(/^(\s*[-+]?\s*)(?!\\(?:\s|$))\S+/, "$1<redacted>");
      pending = false;
    }
    if (SECRET_FLAG_AT_END.test(lines[i])) pending = true;
  }
  return lines
    .join("\n")
    .replace(new RegExp(String.raw`\b(${SECRET_NAME})=(${VALUE}|[^,)\s]+)`, "gi"), (_m, k: string, v: string) => (kept(v) ? `${k}=${v}` : `${k}=<redacted>`))
    .replace(new RegExp(String.raw`(['"])(${SECRET_NAME})\1(\s*:\s*)(${VALUE}|[^,}\s]+)`, "gi"), (_m, q: string, k: string, sep: string, v: string) => (kept(v) ? `${q}${k}${q}${sep}${v}` : `${q}${k}${q}${sep}${q}<redacted>${q}`))
    // A lone backslash after the flag is a line continuation, not its value (handled above).
    .replace(new RegExp(String.raw`(${SECRET_FLAG})(=[ \t]*|[ \t]+)(?!\\(?:\s|$))(${VALUE}|[^\s'",]+)`, "gi"), "$1$2<redacted>")
    // Any case of "bearer" (SGLang's auth compares it lower-cased), and the x-api-key header.
    .replace(/\b(Bearer\s+)\S+/gi, "$1<redacted>")
    .replace(/\b(x-api-key['"]?\s*[:=]\s*['"]?)[^\s'",}]+/gi, "$1<redacted>")
    .replace(/\bhf_[A-Za-z0-9]{8,}\b/g, "hf_<redacted>");
}

/** A secret flag at the end of a line, before a continuation: its value is on the next line. */
const SECRET_FLAG_AT_END = /--[\w-]*(?:api-key|password|token|secret|key)(?:\s*=)?\s*\\\s*$/i;

