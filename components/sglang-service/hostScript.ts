// What runs on a host is a shell file: the bodies live in components/sglang-service/host/
// (shellcheck reads them there, and the bash tests in test/components/sglang-service/host/
// source them), and a script a host receives is a small header of values, rendered here and
// quoted once by one function, then those files copied verbatim.
import * as fs from "node:fs";
import * as path from "node:path";
import { shellQuote } from "./render";

/** The folder of the host scripts' bodies. */
export const HOST_DIR = path.join(__dirname, "host");

/** The components whose host files this renders: each keeps them in its own host/ folder. */
const COMPONENTS_DIR = path.join(__dirname, "..");

const cache = new Map<string, string>();

/** The text of a file under `<component>/host/` (this component's by default), as committed (read once). */
export function hostFile(name: string, component = "sglang-service"): string {
  const key = `${component}/${name}`;
  let text = cache.get(key);
  if (text === undefined) {
    text = fs.readFileSync(path.join(COMPONENTS_DIR, component, "host", name), "utf8");
    // A checkout that turned LF into CRLF (git's autocrlf; .gitattributes asks for LF) would send
    // every line with a \r that bash reads as part of the command.
    if (text.includes("\r")) throw new Error(`components/${component}/host/${name} has CRLF line ends: check it out with LF ones (git config core.autocrlf false, then git checkout -- ${name})`);
    cache.set(key, text);
  }
  return text;
}

/**
 * A value of the header: a word, a number, a yes/no, a list (a bash array), a text of several
 * lines (read whole, trailing newline included, from a quoted here-document: nothing in it
 * expands), or a list of such texts (a bash array).
 */
export type HostValue = string | number | boolean | readonly string[] | { text: string } | { texts: readonly string[] };

const NAME = /^[a-z_][a-z0-9_]*$/;
const END = "DFLASH_EOF";

/** Pure: one assignment of the header; every value quoted here and nowhere else. */
function assignment(name: string, value: HostValue): string {
  if (!NAME.test(name)) throw new Error(`not a shell variable name: ${JSON.stringify(name)}`);
  if (value === undefined || value === null) throw new Error(`${name}: no value to render`);
  if (typeof value === "boolean") return `${name}=${value ? "yes" : "no"}`;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error(`${name}: not a finite number: ${value}`);
    return `${name}=${shellQuote(String(value))}`;
  }
  if (typeof value === "string") return `${name}=${shellQuote(value)}`;
  if (Array.isArray(value)) return `${name}=(${value.map((w) => shellQuote(w)).join(" ")})`;
  if ("texts" in value) return [`${name}=()`, ...value.texts.map((t, i) => hereDocument(`${name}[${i}]`, t))].join("\n");
  return hereDocument(name, (value as { text: string }).text);
}

/** Pure: TARGET (a name, or an element of an array) read whole from a quoted here-document. */
function hereDocument(target: string, text: string): string {
  if (text.includes("\0")) throw new Error(`cannot render ${target}: its text holds a NUL byte`);
  // The end marker: the first of DFLASH_EOF, DFLASH_EOF_2, ... that is not a line of the text
  // (a staged transaction holds here-documents of its own).
  const lines = new Set(text.split("\n"));
  let end = END;
  for (let k = 2; lines.has(end); k++) end = `${END}_${k}`;
  // `read -d ''` stops at the end of the here-document (status 1, the whole text read). The
  // text is read with its last newline: one is added where it has none.
  return [`IFS= read -r -d '' ${target.includes("[") ? `'${target}'` : target} <<'${end}'`, text.endsWith("\n") ? text.slice(0, -1) : text, end].join("\n");
}

/** Pure: the header's assignments, one a line (a text over several). */
export function hostValues(values: Record<string, HostValue>): string {
  return Object.entries(values)
    .map(([k, v]) => assignment(k, v))
    .join("\n");
}

export interface HostScript {
  /** The interpreter line: `#!/bin/bash` unless given (a helper systemd runs directly finds bash on PATH). */
  shebang?: string;
  /** What the script is, for the reader of a host (comment lines, without "#"). */
  about: string[];
  /** `set` options of the script, before anything runs. */
  set: string;
  values: Record<string, HostValue>;
  /** Files under host/ copied verbatim after the values, in order. */
  files: string[];
  /** The component whose host/ folder holds `files`, and whose renderer this is. Defaults to sglang-service. */
  component?: { folder: string; renderer: string };
}

/** The locale every host script runs under (glibc's built-in C.UTF-8: C's numbers and ranges, UTF-8 text). */
export const HOST_LOCALE = "C.UTF-8";

/** Pure: a host script: shebang, what it is, its values, then its files verbatim. */
export function renderHostScript(s: HostScript): string {
  for (const l of s.about) if (/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(l)) throw new Error(`refusing to render a comment line with a newline or control character: ${JSON.stringify(l)}`);
  const { folder, renderer } = s.component ?? { folder: "sglang-service", renderer: "script.ts" };
  const parts = [
    s.shebang ?? "#!/bin/bash",
    ...s.about.map((l) => `# ${l}`.trimEnd()),
    `# Rendered by components/${folder}/${renderer}: the values below, then ${s.files.map((f) => `host/${f}`).join(", ")} verbatim. Do not edit.`,
    `set ${s.set}`,
    // Whatever the host's own locale: numbers with a point (de_DE writes 1,5), character classes
    // as written (tr_TR's [a-z] has no i), messages in English; UTF-8 text stays text.
    `export LC_ALL=${HOST_LOCALE}`,
    "",
    "# --- values ---",
    hostValues(s.values),
    ...s.files.flatMap((f) => ["", `# --- components/${folder}/host/${f} ---`, hostFile(f, folder).replace(/\n*$/, "")]),
    "",
  ];
  return parts.join("\n");
}

/**
 * Pure: a command line that runs `script` (a host script of several lines) in bash on the
 * host, with `args`: the text travels as base64 (a quoted word holds no newline, render.ts
 * shellQuote), decoded there; stdin stays the command's.
 */
export function bashCommand(script: string, args: readonly string[] = []): string {
  return `bash -c "$(echo ${Buffer.from(script).toString("base64")} | base64 -d)" dflash-sglang${args.map((a) => ` ${shellQuote(a)}`).join("")}`;
}
