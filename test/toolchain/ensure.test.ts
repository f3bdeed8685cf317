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

test("a cached engine whose binary changed after its build is refused, naming the folder to remove, even with its mtime put back; the untouched cache is used", () => {
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
    // A use after a full check skips hashing while each file keeps its inode, size, mtime and
    // ctime (SHA256SUMS.stat). A file changed in place, its size and mtime put back, is hashed
    // again and refused: the ctime moved. The file is first copied (a new inode: the real
    // cache's stays untouched), which the next use hashes and accepts.
    assert.ok(fs.existsSync(path.join(root, host, "SHA256SUMS.stat")));
    const lang = path.join(root, host, "bin", "pulumi-language-nodejs");
    execFileSync("cp", ["--preserve=all", lang, `${lang}.copy`]);
    fs.renameSync(`${lang}.copy`, lang);
    const copied = run();
    assert.equal(copied.status, 0, copied.stderr);
    const mtime = fs.statSync(lang).mtime;
    const fd = fs.openSync(lang, "r+");
    const byte = Buffer.alloc(1);
    fs.readSync(fd, byte, 0, 1, 100);
    fs.writeSync(fd, Buffer.from([byte[0] ^ 0xff]), 0, 1, 100);
    fs.closeSync(fd);
    fs.utimesSync(lang, mtime, mtime);
    const edited = run();
    assert.equal(edited.status, 1, "a binary changed in place with its mtime put back is refused");
    assert.match(edited.stderr, /FAILED at step 'verify the cached pulumi-language-nodejs': a file in .* is not the one built there/);
    execFileSync("rm", ["-rf", path.join(root, host)]);
    execFileSync("cp", ["-al", path.join(cache, host), path.join(root, host)]);
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
