// The host scripts' bash tests, run from `npm test`: bats-core (a devDependency) on .bats
// files, and mutants (a copy of a component's host/ folder with one change) that must fail them.
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { REPO_ROOT } from "../../lib/pulumi-env";

const BATS = path.join(REPO_ROOT, "node_modules", "bats", "bin", "bats");

/** Runs bats on `files` with `env` added (where a harness finds the host scripts); TAP output. */
export function bats(files: string[], env: Record<string, string> = {}, filter?: string): { code: number; tap: string } {
  if (!fs.existsSync(BATS)) throw new Error(`bats is not installed at ${BATS}: run npm install (it is a devDependency)`);
  const r = spawnSync(BATS, ["--tap", ...(filter ? ["--filter", filter] : []), ...files], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 300_000 });
  if (r.error) throw r.error;
  return { code: r.status ?? -1, tap: `${r.stdout}${r.stderr}` };
}

/** A copy of `hostDir` with `from` replaced by `to` in `name` (once; it must be there); remove it when done. */
export function mutated(hostDir: string, name: string, from: string, to: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-mutant-"));
  fs.cpSync(hostDir, dir, { recursive: true });
  const file = path.join(dir, name);
  const text = fs.readFileSync(file, "utf8");
  assert.ok(text.includes(from), `${name} no longer holds ${JSON.stringify(from)}: update this mutation`);
  fs.writeFileSync(file, text.replace(from, to));
  return dir;
}
