// toolchain/ensure.sh: a cached build is used only while its files are the ones built (issue 36:
// the cache was trusted because a file there was executable). A copy of the real cache (hard
// links: no rebuild) in a folder of the test's own, then a binary there replaced.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync, spawnSync } from "node:child_process";
import { REPO_ROOT, pulumiEnv } from "../../lib/pulumi-env";

test("a cached engine whose binary changed after its build is refused, naming the folder to remove; the untouched cache is used", () => {
  const env = pulumiEnv();
  const bin = execFileSync("bash", [path.join(REPO_ROOT, "toolchain/ensure.sh")], { env, encoding: "utf8" }).trim();
  const cache = path.dirname(path.dirname(bin));
  const [engine, host] = path.basename(path.dirname(bin)).split("+");
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-toolchain-"));
  try {
    for (const dir of [engine, host]) execFileSync("cp", ["-al", path.join(cache, dir), path.join(root, dir)]);
    const run = () => spawnSync("bash", [path.join(REPO_ROOT, "toolchain/ensure.sh")], { env: { ...env, DFLASH_TOOLCHAIN_CACHE: root, DFLASH_FORCE_BUILD: "1" }, encoding: "utf8" });
    const ok = run();
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(ok.stdout.trim(), path.join(root, `${engine}+${host}`, "bin"));
    assert.ok(fs.existsSync(path.join(root, engine, "SHA256SUMS")));
    // Another file where the engine was (a new file: the real cache's stays as it is).
    const pulumi = path.join(root, engine, "bin", "pulumi");
    fs.rmSync(pulumi);
    fs.writeFileSync(pulumi, "#!/bin/sh\necho planted\n", { mode: 0o755 });
    const refused = run();
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, new RegExp(`FAILED at step 'verify the cached pulumi [^']+': a file in ${root.replace(/[.]/g, "\\.")}/${engine}/bin is not the one built there \\(its sha256 differs from .*SHA256SUMS\\): it was changed after the build\\. Remove ${root.replace(/[.]/g, "\\.")}/${engine} to build it again`));
    assert.doesNotMatch(refused.stdout, /bin/, "no bin folder printed: nothing of it is run");
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
