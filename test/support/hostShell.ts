// Commands on a simulated host for the integration tests: a shell that fails the test on a
// non-zero exit, and the unit's main PID (to tell whether a server was restarted).
import * as assert from "node:assert/strict";
import * as hosts from "../../simhost/hosts";

/** `host` is read at each call: tests start their host in `before`. */
export function hostShell(host: () => hosts.HostInfo, unit = "sglang-k26") {
  const sh = async (cmd: string): Promise<string> => {
    const r = await hosts.ssh(host(), cmd);
    assert.equal(r.code, 0, `${cmd}: ${r.stderr}`);
    return r.stdout.trim();
  };
  const mainPid = async (): Promise<number> => Number(await sh(`systemctl show -p MainPID --value ${unit}.service`));
  return { sh, mainPid };
}
