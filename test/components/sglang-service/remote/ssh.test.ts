// Issue 12, scenario 6, below the schema: even a value that got past it cannot become an
// ssh option, because every ssh we spawn ends its options with "--" before the destination.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { Ssh } from "../../../../components/sglang-service/remote/ssh";

/** A loopback port nobody listens on (bound, then released). */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

test("a user or address beginning with '-' is never read as an ssh option: no ProxyCommand runs", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pwned-"));
  const marker = path.join(dir, "pwned");
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, "k")]);
  const key = fs.readFileSync(path.join(dir, "k"), "utf8");
  const hostKey = fs.readFileSync(path.join(dir, "k.pub"), "utf8").trim();
  try {
    const port = await closedPort();
    for (const conn of [
      { host: "127.0.0.1", user: `-oProxyCommand=touch ${marker}`, port, privateKey: key, hostKey },
      { host: `-oProxyCommand=touch ${marker}`, user: "root", port, privateKey: key, hostKey },
    ]) {
      await assert.rejects(Ssh.open(conn), /cannot reach|SSH to/);
    }
    assert.deepEqual(fs.readdirSync(dir).filter((f) => f.startsWith("pwned")), [], "the ProxyCommand never ran");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a connection refused, reset or timed out is a hiccup to try again; a host key or a key refused never is", async () => {
  const { transientSshFailure } = await import("../../../../components/sglang-service/remote/ssh");
  assert.equal(transientSshFailure("ssh: connect to host 127.0.0.10 port 22: Connection refused"), true);
  assert.equal(transientSshFailure("kex_exchange_identification: read: Connection reset by peer"), true);
  assert.equal(transientSshFailure("ssh: connect to host 10.0.0.5 port 22: Connection timed out"), true);
  assert.equal(transientSshFailure("root@127.0.0.10: Permission denied (publickey)."), false);
  assert.equal(transientSshFailure("Host key verification failed."), false);
  assert.equal(transientSshFailure(""), false, "nothing said: not known to be a hiccup");
});
