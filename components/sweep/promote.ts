// Pure: how a sweep's answer becomes what a user serves: the commands that end the sweep's
// output. Its stack file in stacks/ (the full sweep's is already there, it swept it; an
// adaptive sweep's configuration gets the one `npm run grid` writes, grid.ts), the stack,
// `npx pulumi up`; and for a fleet, the keys of that stack file to set in the fleet's.
import * as YAML from "yaml";
import { BEST, NO_BEST, NONE_NAMED, TIE } from "../verdict/words";

export interface PromoteInput {
  /** The configuration to deploy: the best, or the first (highest estimate) of a tie. */
  stack: string;
  /** The `config` of its stack file: what it deploys unlike Pulumi.yaml (its speculative settings). */
  config: Record<string, unknown>;
  /** The command that writes its stack file into stacks/; absent where the sweep read it from there. */
  write?: string;
  /** The `config` of stacks/Pulumi.<stack>.yaml as it is now, if there is one. */
  existing?: Record<string, unknown>;
  /** The tie it heads (itself first), when the answer is a tie. */
  tie?: string[];
}

/** Deep equality that ignores key order. */
function same(a: unknown, b: unknown): boolean {
  const canon = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(canon) : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon((v as Record<string, unknown>)[k])])) : v;
  return JSON.stringify(canon(a)) === JSON.stringify(canon(b));
}

/**
 * Pure: the section that ends a sweep's report and output: the exact commands that deploy its
 * answer on one host, and the keys to set for a fleet; for no answer, that there is none.
 */
export function promotionText(p: PromoteInput | undefined): string {
  if (!p) return `## Deploy it\n\nNothing to deploy: ${NO_BEST}.\n`;
  const file = `stacks/Pulumi.${p.stack}.yaml`;
  const there = p.existing !== undefined && same(p.existing, p.config);
  let first: string;
  if (!p.write && p.existing === undefined) first = `# ${file} is gone: write it again with the keys below`;
  else if (!p.write || there) first = `# ${file} holds its settings already${p.write ? "" : " (the sweep measured that file)"}`;
  else if (p.existing !== undefined) first = `${p.write} --force   # overwrites ${file}, whose settings differ`;
  else first = `${p.write}   # writes ${file}`;
  const who = p.tie && p.tie.length > 1 ? `${p.stack}, the first of the ${TIE} ${p.tie.join(", ")} (${NONE_NAMED}; it has the highest estimate)` : `${p.stack}, the ${BEST}`;
  return [
    "## Deploy it",
    "",
    `To serve ${who}, on the host of Pulumi.yaml's \`dflash-sglang:host\` (or your dflash.local.yaml: \`npm run simhost -- stack-config\`, README):`,
    "",
    "```sh",
    first,
    `npx pulumi stack init ${p.stack}   # once: skip where the stack exists`,
    `npx pulumi up --stack ${p.stack}`,
    "```",
    "",
    `For a fleet behind HAProxy (docs/guides/fleet.md), set these keys of ${file} in your fleet stack's file (e.g. stacks/Pulumi.serve.yaml, replacing the same keys there), then \`npx pulumi up --stack serve\`:`,
    "",
    "```yaml",
    YAML.stringify({ config: p.config }).trimEnd(),
    "```",
    "",
  ].join("\n");
}
