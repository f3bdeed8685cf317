// scripts/node-env.sh, sourced by every script of the project: Node.js 22 first on PATH when the
// machine's `node` is older (fetched from the npm registry once, checked, cached), the
// machine's own when it is 22 or newer; and a fresh `npm ci` under it warns no EBADENGINE.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { REPO_ROOT } from "../../lib/pulumi-env";

const NODE_ENV = path.join(REPO_ROOT, "scripts/node-env.sh");
const PINNED = fs.readFileSync(NODE_ENV, "utf8").match(/^dflash_node_version=(\S+)/m)![1];

/** PATH without the project's cached Node.js (which `npm test` itself put first). */
const machinePath = () => (process.env.PATH ?? "").split(":").filter((d) => d && !d.includes("dflash-pulumi/node/")).join(":");

/** A folder holding a `node` that says it is version `version` and otherwise is the real one (and, if given, an `npm`). */
function fakeBin(version: string, npm?: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "node-env-"));
  const real = spawnSync("bash", ["-c", "command -v node"], { env: { ...process.env, PATH: machinePath() }, encoding: "utf8" }).stdout.trim();
  fs.writeFileSync(path.join(dir, "node"), `#!/bin/bash\nif [ "$1 $2" = "-p process.versions.node" ]; then echo ${version}; exit 0; fi\nexec ${real} "$@"\n`, { mode: 0o755 });
  if (npm) fs.writeFileSync(path.join(dir, "npm"), npm, { mode: 0o755 });
  return dir;
}

/** Sources node-env.sh and prints the `node` then first on PATH and its version. */
function source(env: NodeJS.ProcessEnv) {
  // As the project's scripts run it: under set -euo pipefail, the function called on its own.
  return spawnSync("bash", ["-c", `set -euo pipefail; . ${JSON.stringify(NODE_ENV)}; dflash_node_env; command -v node; node -p process.version`], { env, encoding: "utf8" });
}

test("a machine whose node is older than 22 runs the pinned Node.js 22 from the cache, fetched once", () => {
  // The real fetch (npm pack, about 50 MB) into the user's cache: `npm test` made it already, so this is the cached case.
  const bin = fakeBin("20.20.2");
  try {
    const r = source({ ...process.env, PATH: `${bin}:${machinePath()}` });
    assert.equal(r.status, 0, r.stderr);
    const [where, version] = r.stdout.trim().split("\n");
    assert.match(where, new RegExp(`dflash-pulumi/node/v${PINNED.replace(/\./g, "\\.")}-linux-(x64|arm64)/bin/node$`));
    assert.equal(version, `v${PINNED}`);
  } finally {
    fs.rmSync(bin, { recursive: true, force: true });
  }
});

test("a machine whose node is 22 or newer keeps its own and fetches nothing", () => {
  const bin = fakeBin("22.1.0", "#!/bin/bash\necho 'npm must not run' >&2\nexit 9\n");
  const cache = fs.mkdtempSync(path.join(os.tmpdir(), "node-cache-"));
  try {
    const r = source({ ...process.env, PATH: `${bin}:${machinePath()}`, DFLASH_NODE_CACHE: cache });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.split("\n")[0], path.join(bin, "node"));
    assert.deepEqual(fs.readdirSync(cache), []);
  } finally {
    fs.rmSync(bin, { recursive: true, force: true });
    fs.rmSync(cache, { recursive: true, force: true });
  }
});

test("a fetched package whose integrity is not the pinned one is refused and nothing is cached", () => {
  // An `npm pack` that hands back something else than the registry's package.
  const arch = os.arch() === "arm64" ? "arm64" : "x64";
  const bin = fakeBin("20.20.2", `#!/bin/bash\necho "not node" > node-linux-${arch}-${PINNED}.tgz\necho node-linux-${arch}-${PINNED}.tgz\n`);
  const cache = fs.mkdtempSync(path.join(os.tmpdir(), "node-cache-"));
  try {
    // A cache folder that does not exist yet (a first fetch).
    const r = source({ ...process.env, PATH: `${bin}:${machinePath()}`, DFLASH_NODE_CACHE: path.join(cache, "first") });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, new RegExp(`node-linux-${arch}-${PINNED.replace(/\./g, "\\.")}\\.tgz has integrity sha512-\\S+, expected sha512-\\S+ \\(pinned in scripts/node-env.sh\\): not using it`));
    assert.deepEqual(fs.readdirSync(path.join(cache, "first")), []);
  } finally {
    fs.rmSync(bin, { recursive: true, force: true });
    fs.rmSync(cache, { recursive: true, force: true });
  }
});

test("a fresh `npm ci` of the project under the set-up's Node.js warns no EBADENGINE (under 20 it would)", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "npm-ci-"));
  try {
    for (const f of ["package.json", "package-lock.json"]) fs.copyFileSync(path.join(REPO_ROOT, f), path.join(dir, f));
    const r = spawnSync("bash", ["-c", `. ${JSON.stringify(NODE_ENV)} && dflash_node_env && npm ci --no-audit --no-fund --prefer-offline --ignore-scripts`], { cwd: dir, env: { ...process.env, PATH: machinePath() }, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr.slice(-3000));
    assert.doesNotMatch(`${r.stdout}${r.stderr}`, /EBADENGINE/);
    // The check can fail: the lock file names packages that require Node.js >= 22.
    const lock = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, { engines?: { node?: string } }> };
    assert.ok(Object.values(lock.packages).some((p) => /^>=\s*22/.test(p.engines?.node ?? "")), "no dependency requires Node.js 22: the EBADENGINE check would prove nothing");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
