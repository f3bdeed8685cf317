// Pure: configuration files (Pulumi.yaml, stack files) read so that this tool and the Pulumi
// engine cannot disagree about them. The engine reads them with Go's yaml.v3, this tool with
// `yaml` (YAML 1.2); the two differ on some bytes and forms (issue 58): a lone CR, NEL, U+2028
// or U+2029 inside a comment is a line break to Go and comment text to us, so a pull request
// could hide a key (`nodeargs`, a host) from the review that the engine then reads; `0600` is
// 384 to Go and 600 to YAML 1.2; `<<:` merges in Go only. Rather than model Go's reader, the
// files are held to a subset both read the same way, and anything outside it is refused,
// naming the file, line, column and what to write instead. test/components/review/one-reader
// checks the subset against the engine itself (`pulumi config --json`) on generated files.
import * as YAML from "yaml";

/** A configuration file outside the subset both readers agree on: where, and what to do. */
export class AmbiguousYaml extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly column: number,
    readonly reason: string,
  ) {
    super(`${file}:${line}:${column}: ${reason}; nothing was previewed or changed`);
  }
}

/** Characters one YAML reader takes for a line break or drops, and another for text. */
const BYTES: [RegExp, string][] = [
  [/\r/, "a carriage return (CR): Go's YAML reader (Pulumi's) takes it for a line break, this tool's for text inside a comment; save the file with LF line endings"],
  [/\u0085/, "a NEL (U+0085): Pulumi's YAML reader takes it for a line break, this tool's for text; remove it"],
  [/\u2028/, "a LINE SEPARATOR (U+2028): Pulumi's YAML reader takes it for a line break, this tool's for text; remove it"],
  [/\u2029/, "a PARAGRAPH SEPARATOR (U+2029): Pulumi's YAML reader takes it for a line break, this tool's for text; remove it"],
  [/(?<!^)\uFEFF/, "a byte-order mark (U+FEFF) after the start of the file: readers differ on it; remove it"],
  [/\uFFFD/, "a byte that is not UTF-8 (or U+FFFD): save the file as UTF-8"],
  [/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/, "a control character: write it as an escape (\\t, \\u0001) inside a double-quoted string, or remove it"],
];

/** A plain scalar both readers resolve alike. */
const CANONICAL_INT = /^-?(0|[1-9][0-9]{0,14})$/;
const CANONICAL_FLOAT = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;
/** Plain words YAML 1.1 (and Go, for a boolean field) reads as booleans, YAML 1.2 as text. */
const WORDS_1_1 = /^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$/;
/**
 * What either reader may take for a number: Go's ParseInt(base 0) and ParseFloat after dropping
 * `_` (0600 octal, 0x1F, 0o17, 0b101, 1_000, +5), YAML 1.1's sexagesimal (1:30), and the
 * special floats (.inf, .nan) that JSON cannot carry.
 */
const NUMBERISH = [/^[-+]?[0-9][0-9_]*$/, /^[-+]?0[xob][0-9a-fA-F_]+$/i, /^[-+]?(\.[0-9_]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9_]+)?$/, /^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$/, /^[-+]?\.(inf|Inf|INF|nan|NaN|NAN)$/];

/** A date or time to Go's reader (a time, written back as "2001-12-14 00:00:00 +0000 UTC"), text to YAML 1.2. */
const TIMESTAMP = /^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}/;

function scalarProblem(source: string): string | undefined {
  if (TIMESTAMP.test(source)) return `the plain value ${JSON.stringify(source)} is a date to Pulumi's YAML reader (it becomes "2001-12-14 00:00:00 +0000 UTC") and text to YAML 1.2; quote it`;
  if (WORDS_1_1.test(source)) return `the plain value ${JSON.stringify(source)} reads as a boolean in YAML 1.1 and as text in YAML 1.2; write true or false, or quote it for text ("${source}")`;
  if (!NUMBERISH.some((r) => r.test(source))) return undefined;
  if (/^-?[0-9]{16,}$/.test(source)) return `the number ${source} has more digits than a JSON number keeps exactly; quote it for text`;
  const finite = Math.abs(Number(source)) < 1e300 && (Number(source) === 0 || Math.abs(Number(source)) > 1e-300);
  if ((CANONICAL_INT.test(source) || CANONICAL_FLOAT.test(source)) && finite) return undefined;
  return `the plain value ${JSON.stringify(source)} is a number that YAML readers read differently (Go reads 0600 as octal 384, YAML 1.2 as 600; _ + 0x 0o 0b : .inf .nan and out-of-range exponents differ too); write it in plain decimal (e.g. 600, 0.85), or quote it for text`;
}

interface Located {
  offset: number;
  reason: string;
}

/** The first construct outside the subset, by the yaml library's own parse (tokens and nodes). */
function structureProblem(text: string): Located | undefined {
  const docs = YAML.parseAllDocuments(text, { merge: false, uniqueKeys: true, prettyErrors: false });
  const list = Array.isArray(docs) ? docs : [docs];
  if (list.length > 1) return { offset: list[1].range[0], reason: "a second YAML document (---): Pulumi reads only the first; keep one document" };
  const doc = list[0];
  if (!doc) return undefined;
  const error = doc.errors[0];
  if (error) return { offset: error.pos[0], reason: `not valid YAML: ${error.message.split("\n")[0]}` };
  const found: Located[] = [];
  const anchorOrTag = (node: YAML.Scalar | YAML.YAMLMap | YAML.YAMLSeq) => {
    // The node's range starts at its value: the anchor or tag is the last one before it.
    const at = node.range?.[0] ?? 0;
    if (node.anchor) found.push({ offset: Math.max(0, text.lastIndexOf(`&${node.anchor}`, at)), reason: `an anchor (&${node.anchor}): write the value out in full (readers differ on anchors, aliases and merges)` });
    if (node.tag) found.push({ offset: /!\S*\s*$/.exec(text.slice(0, at))?.index ?? at, reason: `a tag (${node.tag}): remove it and write the value plainly (quote it for text)` });
  };
  // Tokens: directives, document markers and explicit keys (`? key`), which only the CST shows.
  for (const token of new YAML.Parser().parse(text)) {
    if (token.type === "directive") found.push({ offset: token.offset, reason: `a YAML directive (${token.source.trim()}): it changes how values are read; remove it` });
    if (token.type === "document") {
      const marker = token.start.find((t) => t.type === "doc-start");
      if (marker) found.push({ offset: marker.offset, reason: "a document start marker (---): remove it" });
    }
    if (token.type === "doc-end") found.push({ offset: token.offset, reason: "a document end marker (...): remove it" });
    if (token.type !== "document") continue;
    YAML.CST.visit(token, (item) => {
      const explicit = item.start?.find((t) => t.type === "explicit-key-ind");
      if (explicit) found.push({ offset: explicit.offset, reason: "an explicit key (? key): write the key plainly (key: value)" });
    });
  }
  YAML.visit(doc, {
    Alias(_k, node) {
      found.push({ offset: node.range?.[0] ?? 0, reason: `an alias (*${node.source}): write the value out in full (readers differ on anchors, aliases and merges)` });
    },
    // The most specific visitor alone is called for a node: anchors and tags are checked in each.
    Map(_k, node) {
      anchorOrTag(node);
    },
    Seq(_k, node) {
      anchorOrTag(node);
    },
    Pair(_k, pair, path) {
      const key = pair.key as YAML.Scalar | null;
      // Inside [..] or {..}, `key:` followed at once by `,` `]` `}` is a key to YAML 1.2 and text to Go.
      const inFlow = path.some((p) => (YAML.isMap(p) || YAML.isSeq(p)) && p.flow);
      const end = (pair.key as YAML.Node | null)?.range?.[1];
      if (inFlow && end !== undefined && text[end] === ":" && !/[ \n]/.test(text[end + 1] ?? "\n")) {
        found.push({ offset: (pair.key as YAML.Node).range![0], reason: `a key followed by ":" and no space inside [..] or {..}: Go reads it as text ending in ":", YAML 1.2 as a key; quote the text, or put a space after the colon` });
      }
      if (!YAML.isScalar(key)) {
        found.push({ offset: (pair.key as YAML.Node | null)?.range?.[0] ?? 0, reason: "a key that is not a single word or quoted text: write it as text" });
        return;
      }
      if (key.type === "PLAIN" && key.source === "<<") found.push({ offset: key.range?.[0] ?? 0, reason: "a merge key (<<): Pulumi's reader merges it, this tool's does not; write the keys out in full" });
      if (typeof key.value !== "string") found.push({ offset: key.range?.[0] ?? 0, reason: `the key ${JSON.stringify(key.source ?? String(key.value))} is not text; quote it` });
    },
    Scalar(_k, node) {
      anchorOrTag(node);
      const at = node.range?.[0] ?? 0;
      const raw = text.slice(node.range?.[0] ?? 0, node.range?.[1] ?? 0);
      if (node.type === "PLAIN") {
        const problem = scalarProblem(node.source ?? raw);
        if (problem) found.push({ offset: at, reason: problem });
        // `x:` inside [..] or {..} is text to Go and a key to YAML 1.2.
        if (/:$/.test(node.source ?? raw)) found.push({ offset: at, reason: `the plain value ${JSON.stringify(node.source ?? raw)} ends with ":": readers take it for text or for a key; quote it` });
        // Over several lines, a line that begins a comment or a list entry ends the value to Go,
        // and is folded into it by YAML 1.2 (a hidden entry).
        const continued = raw.split("\n").slice(1);
        if (continued.some((l) => /^\s*(#|- |-$)/.test(l))) found.push({ offset: at, reason: "a plain value over several lines with a comment or a list entry among them: readers end it in different places; write it on one line, or quote it" });
      } else if (node.type !== "QUOTE_DOUBLE" && node.type !== "QUOTE_SINGLE" && /^[|>][0-9+]|^[|>]-[0-9]/.test(raw)) {
        found.push({ offset: at, reason: "a block value with an indentation or keep (+) indicator: readers differ on them; use | or |- (or > / >-)" });
      }
    },
  });
  // Tabs: indentation to YAML, and readers differ where else they allow them; comments may hold them.
  for (const m of text.matchAll(/\t/g)) {
    if (!insideComment(text, m.index ?? 0, doc)) {
      found.push({ offset: m.index ?? 0, reason: "a tab: YAML readers differ on tabs outside comments; indent and separate with spaces (\\t in double quotes for a tab in a value)" });
      break;
    }
  }
  return found.sort((a, b) => a.offset - b.offset)[0];
}

/** Whether `offset` is in a comment: after a `#` that begins one on its line (outside any value). */
function insideComment(text: string, offset: number, doc: YAML.Document.Parsed): boolean {
  const lineStart = text.lastIndexOf("\n", offset - 1) + 1;
  const values: [number, number][] = [];
  YAML.visit(doc, {
    Scalar(_k, n) {
      if (n.range) values.push([n.range[0], n.range[1]]);
    },
  });
  const inValue = (at: number) => values.some(([from, to]) => at >= from && at < to);
  for (let i = lineStart; i < offset; i++) {
    if (text[i] === "#" && (i === 0 || /[ \t\n]/.test(text[i - 1] ?? "\n")) && !inValue(i)) return true;
  }
  return false;
}

/** 1-based line and column of an offset. */
function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  return { line, column: offset - (before.lastIndexOf("\n") + 1) + 1 };
}

/**
 * Refuses a configuration file outside the subset that this tool and the Pulumi engine read the
 * same way: throws AmbiguousYaml with the file (as the caller names it), line, column and fix.
 */
export function refuseAmbiguousYaml(text: string, file: string): void {
  for (const [pattern, reason] of BYTES) {
    const m = pattern.exec(text);
    if (m) {
      const { line, column } = position(text, m.index);
      throw new AmbiguousYaml(file, line, column, reason);
    }
  }
  // A last line without its line break: Go ends a block value there without one, YAML 1.2 with one.
  if (text !== "" && !text.endsWith("\n")) {
    const { line, column } = position(text, text.length);
    throw new AmbiguousYaml(file, line, column, "the file does not end with a line break: readers end its last value differently; add one");
  }
  const problem = structureProblem(text);
  if (problem) {
    const { line, column } = position(text, problem.offset);
    throw new AmbiguousYaml(file, line, column, problem.reason);
  }
}

/** A configuration file's contents as both readers see them (after refuseAmbiguousYaml); null for an empty file. */
export function readConfigYaml(text: string, file: string): unknown {
  refuseAmbiguousYaml(text, file);
  return YAML.parse(text, { merge: false, uniqueKeys: true }) ?? null;
}

/**
 * Pure: Pulumi.yaml with its top-level `config` entry (key, value and the comments inside it)
 * cut out, byte for byte otherwise: what the engine's project loading reads besides
 * configuration. Two files whose text here differs by any byte differ as programs.
 */
export function projectOutsideConfig(text: string, file: string): string {
  refuseAmbiguousYaml(text, file);
  const doc = YAML.parseDocument(text, { merge: false, uniqueKeys: true });
  if (!YAML.isMap(doc.contents)) return text;
  const pairs = doc.contents.items;
  const at = pairs.findIndex((p) => YAML.isScalar(p.key) && p.key.value === "config");
  if (at < 0) return text;
  const start = lineStartOf(text, (pairs[at].key as YAML.Scalar).range![0]);
  const next = pairs[at + 1]?.key as YAML.Node | undefined;
  // To the next top-level key's line, or the end: the block's own comments go with it.
  const end = next?.range ? lineStartOf(text, next.range[0]) : text.length;
  return `${text.slice(0, start)}${text.slice(end)}`;
}

const lineStartOf = (text: string, offset: number) => text.lastIndexOf("\n", offset - 1) + 1;
