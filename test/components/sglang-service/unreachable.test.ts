// Issue 63, item 2: an unreachable host read `error serializing property "serverArgs": error
// serializing property "nodes": ... "connection" (x3) ...` before the cause. The SDK prefixes
// that to the message of the very error object that rejects a resource input, at every input
// it passes through; the program's ProgramError keeps its message, and the message leads with
// the cause and what to check. Through the engine: a stack whose host is a loopback address
// with nothing listening on its port.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { unreachableMessage } from "../../../components/sglang-service/remote/ssh";
import { ProgramError } from "../../../components/sglang-service/sglangService";
import { readRepoStackConfig, simWorkspace } from "../../../lib/workspace";

/** A port of `address` nobody listens on (bound, then released). */
function closedPort(address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, address, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

test("ssh's failures to connect read cause first, then what to check", () => {
  const conn = { host: "127.0.0.97", port: 2222, user: "root" };
  assert.equal(
    unreachableMessage(conn, { code: 255, stderr: "ssh: connect to host 127.0.0.97 port 2222: Connection refused\n" }),
    "cannot reach 127.0.0.97:2222 over SSH: connection refused (nothing accepts connections on port 2222 of 127.0.0.97). Check host.address and host.port, and that sshd runs on the host. (ssh: connect to host 127.0.0.97 port 2222: Connection refused)",
  );
  assert.match(unreachableMessage({ ...conn, host: "gpu-1.lab" }, { code: 255, stderr: "ssh: Could not resolve hostname gpu-1.lab: Name or service not known" }), /^cannot reach gpu-1\.lab:2222 over SSH: the name gpu-1\.lab does not resolve\. Check host\.address\./);
  assert.match(unreachableMessage(conn, { code: 255, stderr: "ssh: connect to host 127.0.0.97 port 2222: Connection timed out" }), /^cannot reach 127\.0\.0\.97:2222 over SSH: the connection timed out/);
  assert.match(unreachableMessage({ ...conn, host: "fd00::5" }, { code: 255, stderr: "ssh: connect to host fd00::5 port 2222: No route to host" }), /^cannot reach \[fd00::5\]:2222 over SSH: no route to the host\./);
  assert.equal(unreachableMessage(conn, { code: 255, stderr: "root@127.0.0.97: Permission denied (publickey)." }), "cannot reach root@127.0.0.97:2222 over SSH (exit 255): root@127.0.0.97: Permission denied (publickey).. Check host.address, host.port, host.user and the private key.");
});

test("a ProgramError's message stays its own when the SDK prefixes the input it rejected", () => {
  const e = new ProgramError("cannot reach h:22 over SSH: connection refused");
  e.message = `error serializing property "connection": ${e.message}`;
  assert.equal(e.message, "cannot reach h:22 over SSH: connection refused");
  assert.ok(e instanceof Error && e.stack?.includes("cannot reach h:22"));
});

test("preview of a stack whose host refuses connections: the error is the cause, no serialization chain before it", async () => {
  const address = "127.0.0.97";
  const port = await closedPort(address);
  const keys = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-unreachable-"));
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(keys, "id")]);
  const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
  const ws = simWorkspace({ s: { ...readRepoStackConfig("b8t4-w2048"), "dflash-sglang:host": { address, port, hostKey, privateKeyPath: path.join(keys, "id") } } });
  try {
    const err = await (await ws.stack("s")).preview().then(
      () => assert.fail("preview succeeded against a closed port"),
      (e: Error) => e,
    );
    assert.doesNotMatch(err.message, /error serializing property/);
    const cause = `cannot reach ${address}:${port} over SSH: connection refused (nothing accepts connections on port ${port} of ${address}). Check host.address and host.port, and that sshd runs on the host.`;
    const errorLines = err.message.split("\n").filter((l) => /^\s*error: /.test(l));
    assert.ok(errorLines.length > 0, err.message);
    for (const l of errorLines) assert.ok(l.trim().startsWith(`error: ${cause}`), l);
  } finally {
    ws.cleanup();
    fs.rmSync(keys, { recursive: true, force: true });
  }
});
