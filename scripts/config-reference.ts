// `npm run config-reference -- [options]`: writes docs/configuration.md, the reference of every
// setting, from the zod schemas and their TSDoc (components/sglang-service/reference.ts); with
// --check it writes nothing and exits 1 when the file is stale. It needs no set-up beyond the
// npm dependencies. `npm run config-reference -- --help` lists the options.
import * as fs from "node:fs";
import * as path from "node:path";
import { command, flag, parseCommandOrExit } from "../lib/cli";
import { REPO_ROOT } from "../lib/pulumi-env";
import { renderConfigReference } from "../components/sglang-service/reference";

/** Where the reference lives, from the project folder. */
export const REFERENCE_FILE = "docs/configuration.md";

const INVOCATION = "npm run config-reference --";
const COMMAND = command({
  summary: [
    `Writes ${REFERENCE_FILE}: every setting of a stack (its type, default or required, what it does, an example),`,
    "generated from the zod schemas and the TSDoc of each key; it fails, naming the key, where a key has no TSDoc.",
  ].join("\n"),
  options: {
    check: flag(`write nothing; exit 1 if ${REFERENCE_FILE} differs from a fresh render`),
  },
});

/** Pure: where two texts first differ, as a hint for a stale file ("line 12: ... / ..."). */
export function firstDifference(committed: string, fresh: string): string {
  const a = committed.split("\n");
  const b = fresh.split("\n");
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) return `line ${i + 1}:\n  file:   ${a[i] === undefined ? "(end of file)" : JSON.stringify(a[i])}\n  schema: ${b[i] === undefined ? "(end of file)" : JSON.stringify(b[i])}`;
  }
  return "";
}

function main(): number {
  const { options } = parseCommandOrExit(INVOCATION, COMMAND);
  const file = path.join(REPO_ROOT, REFERENCE_FILE);
  const fresh = renderConfigReference();
  if (options.check) {
    if (!fs.existsSync(file)) {
      process.stderr.write(`${REFERENCE_FILE} is missing: run \`npm run config-reference\` and commit it.\n`);
      return 1;
    }
    const committed = fs.readFileSync(file, "utf8");
    if (committed === fresh) {
      process.stdout.write(`${REFERENCE_FILE} is up to date\n`);
      return 0;
    }
    process.stderr.write(
      `${REFERENCE_FILE} is stale: it differs from the schema's reference at ${firstDifference(committed, fresh)}\n` +
        `Run \`npm run config-reference\` and commit ${REFERENCE_FILE} (\`git diff ${REFERENCE_FILE}\` shows the change).\n`,
    );
    return 1;
  }
  fs.writeFileSync(file, fresh);
  process.stdout.write(`wrote ${REFERENCE_FILE}\n`);
  return 0;
}

if (require.main === module) {
  try {
    process.exitCode = main();
  } catch (e) {
    process.stderr.write(`config-reference failed: ${(e as Error).message}\n`);
    process.exitCode = 1;
  }
}
