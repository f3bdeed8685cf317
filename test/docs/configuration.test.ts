// docs/configuration.md, the configuration reference (issue 63), is generated from the zod
// schemas and the TSDoc of each key (components/sglang-service/reference.ts). Here: the committed
// file is a fresh render; every leaf key of the schemas, walked here independently of the
// renderer, has its row with its default and its ceiling; a key without TSDoc (or with an
// invalid example) fails the render; a few lines are pinned. Each check is shown to fail on a
// doc or an input that breaks it.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as util from "node:util";
import { z } from "zod";
import { REPO_ROOT } from "../../lib/pulumi-env";
import { deploymentSchema, timeoutsSchema } from "../../components/sglang-service/schema";
import { verdictSchema } from "../../components/verdict/schema";
import { seconds, section, trueOrFalse, wholeNumber } from "../../components/sglang-service/values";
import { defaultReferenceInput, renderConfigReference, REQUIRED_WHEN, type ReferenceInput } from "../../components/sglang-service/reference";
import { firstDifference } from "../../scripts/config-reference";
import { runScript } from "../support/commandLines";

const FILE = path.join(REPO_ROOT, "docs", "configuration.md");
const FRESH = renderConfigReference();

// ---------------------------------------------------------------------------------
// (a) The committed file is the schema's reference.

/** Why a committed reference is stale, or "" when it is not. */
function staleness(committed: string, fresh: string): string {
  if (committed === fresh) return "";
  return `docs/configuration.md is stale (${firstDifference(committed, fresh)}): run \`npm run config-reference\` and commit it`;
}

test("docs/configuration.md is a fresh render of the schemas (else: npm run config-reference)", () => {
  assert.equal(staleness(fs.readFileSync(FILE, "utf8"), FRESH), "");
  // The render is deterministic.
  assert.equal(renderConfigReference(), FRESH);
});

test("the staleness check fails on a file that differs from the render, saying where and what to run", () => {
  const edited = FRESH.replace("| `300` |", "| `301` |");
  assert.notEqual(edited, FRESH);
  const why = staleness(edited, FRESH);
  assert.match(why, /^docs\/configuration\.md is stale \(line \d+:\n {2}file: {3}".*`301`.*"\n {2}schema: ".*`300`.*"\): run `npm run config-reference` and commit it$/);
});

test("npm run config-reference -- --check passes on the committed file; --help and mistakes are answered before anything is written", () => {
  const check = runScript("scripts/config-reference.ts", "--check");
  assert.equal(check.status, 0, check.stderr);
  assert.equal(check.stdout, "docs/configuration.md is up to date\n");
  const help = runScript("scripts/config-reference.ts", "--help");
  assert.equal(help.status, 0);
  assert.ok(help.stdout.startsWith("usage: npm run config-reference -- [options]\n"), help.stdout);
  assert.match(help.stdout, /\n {2}--check +write nothing; exit 1 if docs\/configuration\.md differs from a fresh render\n/);
  const typo = runScript("scripts/config-reference.ts", "--chek");
  assert.equal(typo.status, 2);
  assert.match(typo.stderr, /unknown option --chek; did you mean --check\?/);
});

// ---------------------------------------------------------------------------------
// (b) Every leaf key of the schemas, walked here on its own, is in the reference.

interface Leaf {
  path: string;
  kind: "required" | "optional" | "default";
  default?: unknown;
  /** The highest value, or a list's most entries. */
  ceiling?: number;
}

type AnyDef = { type: string; innerType: z.ZodType; defaultValue: unknown; shape: Record<string, z.ZodType>; element: z.ZodType; options: z.ZodType[]; checks?: { _zod: { def: { check: string; value?: number; maximum?: number } } }[] };
const defOf = (s: z.ZodType) => (s as unknown as { def: AnyDef }).def;

function ceiling(s: z.ZodType): number | undefined {
  const def = defOf(s);
  const checks = (def.checks ?? []).map((c) => c._zod.def);
  if (def.type === "number") return checks.find((c) => c.check === "less_than")?.value;
  if (def.type === "array") return checks.find((c) => c.check === "max_length")?.maximum;
  if (def.type === "union") return def.options.map(ceiling).find((c) => c !== undefined);
  return undefined;
}

/** Every key under `schema` that holds a value (a list of mappings and a union with a mapping, and the keys under them). */
function leavesOf(schema: z.ZodType, at: string): Leaf[] {
  let s = schema;
  let kind: Leaf["kind"] = "required";
  let dflt: unknown;
  while (["default", "optional", "nullable"].includes(defOf(s).type)) {
    const def = defOf(s);
    if (kind === "required" && def.type === "default") [kind, dflt] = ["default", def.defaultValue];
    if (kind === "required" && def.type === "optional") kind = "optional";
    s = def.innerType;
  }
  const def = defOf(s);
  const prefix = at ? `${at}.` : "";
  if (def.type === "object") return Object.entries(def.shape).flatMap(([k, child]) => leavesOf(child, `${prefix}${k}`));
  const leaf: Leaf = { path: at, kind, ...(kind === "default" ? { default: dflt } : {}), ceiling: ceiling(s) };
  const below =
    def.type === "array" && defOf(def.element).type === "object"
      ? leavesOf(def.element, `${at}[N]`)
      : def.type === "union"
        ? def.options.filter((o) => defOf(o).type === "object").flatMap((o) => leavesOf(o, at))
        : [];
  return [leaf, ...below];
}

const LEAVES = [...leavesOf(deploymentSchema, ""), ...leavesOf(verdictSchema, "verdict")];

/** The rows of the reference's key tables: key (first code span of the first cell) -> [type, default]. */
function rows(doc: string): Map<string, { line: string; type: string; dflt: string }> {
  const out = new Map<string, { line: string; type: string; dflt: string }>();
  let inTable = false;
  for (const line of doc.split("\n")) {
    if (line === "| Key | Type | Default |") inTable = true;
    else if (!line.startsWith("|")) inTable = false;
    else if (inTable && !line.startsWith("|---")) {
      const cells = line.slice(2, -2).split(" | ");
      const key = /`([^`]+)`/.exec(cells[0])?.[1];
      if (key) out.set(key, { line, type: cells[1], dflt: cells[2] });
    }
  }
  return out;
}

/** What the reference lacks of the schemas' keys: a row, its default, its ceiling; and rows of no key. */
function missingFrom(doc: string): string[] {
  const table = rows(doc);
  const problems: string[] = [];
  for (const leaf of LEAVES) {
    const row = table.get(leaf.path);
    if (!row) {
      problems.push(`${leaf.path}: no row`);
      continue;
    }
    if (leaf.kind === "default") {
      const shown = /^`(.*)`$/.exec(row.dflt)?.[1];
      let value: unknown = Symbol("unreadable");
      try {
        value = JSON.parse(shown ?? "");
      } catch {
        // reported below
      }
      if (!util.isDeepStrictEqual(value, leaf.default)) problems.push(`${leaf.path}: default ${JSON.stringify(leaf.default)}, the row says ${row.dflt}`);
    } else if (leaf.kind === "required" && !row.dflt.startsWith("required")) problems.push(`${leaf.path}: required, the row says ${row.dflt}`);
    else if (leaf.kind === "optional" && row.dflt !== (REQUIRED_WHEN[leaf.path] ? `not set; ${REQUIRED_WHEN[leaf.path]}` : "not set (optional)")) problems.push(`${leaf.path}: optional, the row says ${row.dflt}`);
    if (leaf.ceiling !== undefined && !new RegExp(`(^|[^\\d.])${String(leaf.ceiling).replace(".", "\\.")}([^\\d.]|$)`).test(row.type)) {
      problems.push(`${leaf.path}: ceiling ${leaf.ceiling} not in its type "${row.type}"`);
    }
  }
  const known = new Set(LEAVES.map((l) => l.path));
  for (const key of table.keys()) if (!known.has(key)) problems.push(`${key}: a row of no key of the schemas`);
  return problems;
}


test("every leaf key of the schemas has its row, with its default (or required) and its ceiling", () => {
  assert.ok(LEAVES.length >= 90, `the walk found only ${LEAVES.length} keys`);
  for (const key of ["host.address", "nodes[N].hostKey", "fleet.loadBalancer.port", "fleet.loadBalancer.host.address", "sglangBuild.flags.topkEnv", "benchmark.concurrency", "verdict.maxAgeDays"]) {
    assert.ok(LEAVES.some((l) => l.path === key), `the walk finds ${key}`);
  }
  assert.deepEqual(missingFrom(FRESH), []);
  // The secret settings, read apart from the schema.
  for (const key of ["apiKey", "hfToken", "sshPrivateKey"]) assert.ok(FRESH.includes(`| \`${key}\` |`) && FRESH.includes(`config set --secret --stack <stack> ${key}`), `${key} in the secrets table`);
});

test("the key check fails on a reference that skips a key, shows another default or ceiling, or has a row of no key", () => {
  const without = FRESH.split("\n").filter((l) => !l.startsWith("| [`speculative.budget`]")).join("\n");
  assert.deepEqual(missingFrom(without), ["speculative.budget: no row"]);
  const otherDefault = FRESH.replace("| [`timeouts.drainSeconds`](#timeoutsdrainseconds) | positive number of seconds, at most 3600 (1 h) | `300` |", "| [`timeouts.drainSeconds`](#timeoutsdrainseconds) | positive number of seconds, at most 360 (6 min) | `30` |");
  assert.deepEqual(missingFrom(otherDefault), ["timeouts.drainSeconds: default 300, the row says `30`", 'timeouts.drainSeconds: ceiling 3600 not in its type "positive number of seconds, at most 360 (6 min)"']);
  const notRequired = FRESH.replace(/(\| \[`model\.path`\]\(#modelpath\) \| [^|]+ \| )required \|/, "$1not set (optional) |");
  assert.deepEqual(missingFrom(notRequired), ["model.path: required, the row says not set (optional)"]);
  const extra = FRESH.replace("| [`timeouts.pollMs`]", "| [`timeouts.pollSeconds`](#x) | whole number | `1` |\n| [`timeouts.pollMs`]");
  assert.deepEqual(missingFrom(extra), ["timeouts.pollSeconds: a row of no key of the schemas"]);
});

test("every documented key has a description, a type, a default line and an example (verdict's: none, it is not read)", () => {
  const blocks = FRESH.split(/\n(?=### `)/).slice(1);
  assert.ok(blocks.length >= 70, `only ${blocks.length} key blocks`);
  for (const block of blocks) {
    const [heading, , description] = block.split("\n");
    assert.ok(description && !description.startsWith("- Type:"), `${heading} has a description:\n${block}`);
    assert.match(block, /\n- Type: \S/, heading);
    assert.match(block, /\n- Default: \S/, heading);
    assert.match(block, /\n- Example/, heading);
  }
  // In-page links lead to headings (GitHub's anchors: lower case, punctuation dropped, -1 for a repeat).
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, text] of FRESH.matchAll(/^#{1,6} (.*)$/gm)) {
    const slug = text.replace(/`/g, "").toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
    const n = seen.get(slug);
    seen.set(slug, (n ?? -1) + 1);
    anchors.add(n === undefined ? slug : `${slug}-${n + 1}`);
  }
  const broken = [...FRESH.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]).filter((a) => !anchors.has(a));
  assert.deepEqual(broken, []);
});

// ---------------------------------------------------------------------------------
// (c) A key without TSDoc fails the render.

/** The project's input with one edit to the text of schema.ts. */
function withSchemaText(edit: (text: string) => string): ReferenceInput {
  const input = defaultReferenceInput();
  return { ...input, sources: input.sources.map((s) => (s.file === "components/sglang-service/schema.ts" ? { ...s, text: edit(s.text) } : s)) };
}

test("a key of the schema without TSDoc fails the render, naming it", () => {
  const input = withSchemaText((t) => t.replace("  /** DDTree node budget. */\n", ""));
  assert.throws(() => renderConfigReference(input), /^Error: the configuration reference cannot be rendered:\n {2}- speculative\.budget: no TSDoc on its property in the schema: add a \/\*\* \.\.\. \*\/ comment saying what it does$/);
  // A TSDoc changed in the schema changes the reference: the committed file is then stale.
  const reworded = renderConfigReference(withSchemaText((t) => t.replace("/** DDTree node budget. */", "/** DDTree node budget: nodes of the draft tree per step. */")));
  assert.ok(reworded.includes("\nDDTree node budget: nodes of the draft tree per step.\n"));
  assert.notEqual(staleness(FRESH, reworded), "");
});

/** A one-section deployment written in `text`, for the render's rules on a small input. */
function fakeInput(text: string, extra: Partial<ReferenceInput> = {}): ReferenceInput {
  const deployment = z
    .object({
      fake: section("fake", {
        limit: wholeNumber("fake.limit", 1, 8).default(2),
        wait: seconds("fake.wait", 60).optional(),
        on: trueOrFalse("fake.on").default(false),
      }),
    })
    .strict();
  return { deployment, unread: [], sources: [{ file: "fake.ts", text }], undocumented: {}, examples: { "fake.wait": { value: 1.5 } }, ...extra };
}

const FAKE = `
const deployment = z.object({
  fake: section("fake", {
    /** How many at most. Defaults to 2. */
    limit: wholeNumber("fake.limit", 1, 8).default(2),
    /** How long to wait. */
    wait: seconds("fake.wait", 60).optional(),
    on: trueOrFalse("fake.on").default(false),
  }),
});`;

test("on a small section: the key without TSDoc fails the render; documented, it renders; a stale fallback or example fails too", () => {
  assert.throws(() => renderConfigReference(fakeInput(FAKE)), (e: Error) => {
    assert.match(e.message, /\n {2}- fake\.on: no TSDoc on its property/);
    assert.doesNotMatch(e.message, /fake\.(limit|wait):/);
    return true;
  });
  const documented = FAKE.replace('    on: trueOrFalse("fake.on")', '    /** Whether it is on. */\n    on: trueOrFalse("fake.on")');
  const doc = renderConfigReference(fakeInput(documented));
  assert.ok(doc.includes("| [`fake.limit`](#fakelimit) | whole number from 1 to 8 | `2` |"), doc);
  assert.ok(doc.includes("\nHow many at most.\n"), "the redundant Defaults-to sentence is left out");
  assert.ok(doc.includes("| [`fake.wait`](#fakewait) | positive number of seconds, at most 60 (1 min) | not set (optional) |"), doc);
  assert.ok(doc.includes("- Example: `npx pulumi config set --path --stack <stack> --type float fake.wait 1.5`"), doc);
  assert.ok(doc.includes("\nWhether it is on.\n"));
  // A description kept in the reference for a key that has TSDoc now, or an example the schema refuses.
  assert.throws(() => renderConfigReference(fakeInput(documented, { undocumented: { "fake.on": "On." } })), /fake\.on: has TSDoc now; remove its entry from the reference's UNDOCUMENTED list/);
  assert.throws(() => renderConfigReference(fakeInput(documented, { examples: { "fake.wait": { value: 90 } } })), /fake\.wait: its example 90 is invalid: fake\.wait must be a positive number of seconds, at most 60 \(1 min\)/);
  assert.throws(() => renderConfigReference(fakeInput(documented, { examples: {} })), /fake\.wait: no example: it has no default and no fixed choices/);
});

// ---------------------------------------------------------------------------------
// (d) Pinned lines.

const PINNED = [
  "| [`speculative.budget`](#speculativebudget) | whole number from 1 to 1024 | not set; required when `speculative.algorithm` is DDTREE (the default) |",
  "- Example: `npx pulumi config set --path --stack <stack> speculative.budget 16`",
  "| [`model.path`](#modelpath) | an absolute path (text starting with /) | required |",
  "| [`timeouts.drainSeconds`](#timeoutsdrainseconds) | positive number of seconds, at most 3600 (1 h) | `300` |",
  '| [`speculative.algorithm`](#speculativealgorithm) | one of "DFLASH", "DDTREE", or null | `"DDTREE"` |',
  "| [`fleet.loadBalancer.port`](#fleetloadbalancerport) | whole number from 1 to 65535 | `8080` |",
  "| `nodes[N].address` (as [`host.address`](#hostaddress)) | a host name or an IP address | required in each entry of `nodes` |",
  "- Example: `npx pulumi config set --path --stack <stack> --type float model.memFractionStatic 0.85`",
  "- Example: `npx pulumi config set --path --stack <stack> --type string benchmark.runId 2`",
  "| `sshPrivateKey` | The SSH private key (the key file's text) for `host`, and for every node, replica and load balancer without a `privateKeyPath` of its own. When set, it is used instead of host.privateKeyPath. | `npx pulumi config set --secret --stack <stack> sshPrivateKey < ~/.ssh/id_ed25519` |",
];

const unpinned = (doc: string) => PINNED.filter((line) => !doc.split("\n").includes(line));

test("pinned lines: speculative.budget, model.path required, timeouts.drainSeconds default 300 at most 3600, ...", () => {
  assert.deepEqual(unpinned(FRESH), []);
});

test("a pinned line fails when the schema changes: timeouts.drainSeconds with another default and ceiling", () => {
  const shape = defOf(deploymentSchema).shape;
  const timeouts = timeoutsSchema.extend({ drainSeconds: seconds("timeouts.drainSeconds", 7200).default(600) });
  const changed = z.object({ ...shape, timeouts: timeouts.default(timeouts.parse({})) }).strict();
  const doc = renderConfigReference({ ...defaultReferenceInput(), deployment: changed });
  assert.deepEqual(unpinned(doc), [PINNED[3]]);
  assert.ok(doc.includes("| [`timeouts.drainSeconds`](#timeoutsdrainseconds) | positive number of seconds, at most 7200 (2 h) | `600` |"));
});
