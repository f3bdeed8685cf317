// hosts.reboot: a simulated host reboots on its own address, keys and disk, either by its own
// orderly shutdown (units stopped, EXIT hooks run) or by a power cut (every process SIGKILLed
// at once). What is on disk stays, /run starts empty, the GPUs are free, and a unit enabled for
// the boot comes back by itself. One host, rebooted both ways in turn.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../simhost/hosts";
import { hostShell } from "../support/hostShell";

const HOST = `reboot-sim-${process.pid}`;
let host: hosts.HostInfo;
const { sh } = hostShell(() => host);

/** An enabled unit that notes each start in /run and each stop on disk. */
const PROBE_UNIT = [
  "[Unit]",
  "Description=reboot probe",
  "[Service]",
  "ExecStart=/bin/sh -c 'date +%s%N > /run/reboot-probe.started; exec sleep infinity'",
  "ExecStop=/bin/sh -c 'echo stopped >> /var/lib/reboot-test/probe.stops'",
  "[Install]",
  "WantedBy=multi-user.target",
  "",
].join("\n");

/**
 * What a reboot may keep or lose: files on disk and in /run, a probe unit enabled for the boot,
 * a host step that leaves a partial file and has an EXIT hook (as the transaction has), and GPU
 * memory held by a live process, whose release the driver delays by an hour. The hook writes
 * with a shell builtin: a command it forked (rm) could itself get the SIGTERM systemd sends to
 * every process of the unit as it stops it, and whether the hook ran would be left to chance.
 */
async function arrange(): Promise<{ hostKey: string; machineId: string; gpuHolder: string }> {
  await sh("mkdir -p /var/lib/reboot-test && rm -f /var/lib/reboot-test/step.partial /var/lib/reboot-test/step.exit && echo disk > /etc/reboot-test.conf && echo disk > /var/lib/reboot-test/data && echo tmpfs > /run/reboot-test");
  await sh(`cat > /etc/systemd/system/reboot-probe.service <<'EOF'\n${PROBE_UNIT}EOF\nsystemctl daemon-reload && systemctl enable --now reboot-probe.service && rm -f /var/lib/reboot-test/probe.stops`);
  await sh(
    "systemd-run --quiet --unit=reboot-step bash -c 'trap \"echo ran > /var/lib/reboot-test/step.exit\" EXIT; trap \"exit 143\" TERM; touch /var/lib/reboot-test/step.partial; sleep infinity & wait' && " +
      "for i in $(seq 100); do [ -e /var/lib/reboot-test/step.partial ] && break; sleep 0.1; done; test -e /var/lib/reboot-test/step.partial",
  );
  hosts.fault(HOST, JSON.stringify({ gpuReleaseDelaySeconds: 3600 }));
  const gpuHolder = await sh(
    "systemd-run --quiet --unit=reboot-gpu-holder sleep infinity && pid=$(systemctl show -p MainPID --value reboot-gpu-holder) && ticks=$(awk '{print $22}' /proc/$pid/stat) && " +
      'mkdir -p /run/gpu-sim/procs && printf \'{"pid":%s,"startTicks":%s,"processName":"holder","perGpuMiB":{"0":1000}}\' $pid $ticks > /run/gpu-sim/procs/$pid.json && echo $pid',
  );
  assert.equal(await sh("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -n 1"), "1000", "the holder's memory is in use before the reboot");
  return { hostKey: await sh("cat /etc/ssh/ssh_host_ed25519_key.pub"), machineId: await sh("cat /etc/machine-id"), gpuHolder };
}

/** What every reboot must give: the same host, its disk, an empty /run, free GPUs, the enabled unit running again. */
async function assertRebooted(before: { hostKey: string; machineId: string }, rebooted: hosts.HostInfo): Promise<void> {
  assert.deepEqual(rebooted, host, "same address, port, keys and state");
  assert.equal(await sh("cat /etc/ssh/ssh_host_ed25519_key.pub"), before.hostKey, "same host key");
  assert.equal(await sh("cat /etc/machine-id"), before.machineId);
  assert.equal(await sh("systemctl is-system-running"), "running");
  assert.equal(await sh("cat /etc/reboot-test.conf /var/lib/reboot-test/data"), "disk\ndisk", "what is on disk stays");
  assert.equal(await sh("ls /run/reboot-test 2>&1 || true"), "ls: cannot access '/run/reboot-test': No such file or directory", "/run starts empty");
  assert.equal(await sh("systemctl is-active reboot-probe.service"), "active", "the enabled unit started by itself");
  assert.equal(await sh("test -e /run/reboot-probe.started && echo started"), "started");
  assert.equal(await sh("systemctl is-active reboot-step.service reboot-gpu-holder.service || true"), "inactive\ninactive", "transient units are gone");
  assert.deepEqual(
    (await sh("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits")).split("\n"),
    Array.from({ length: host.gpus }, () => "0"),
    "no process survives a reboot: every GPU is free, whatever the driver's release delay",
  );
  assert.equal(await sh("nvidia-smi --query-compute-apps=pid --format=csv,noheader"), "");
}

before(async () => {
  host = await hosts.start(HOST, { gpus: 2 });
});

after(async () => {
  await hosts.stop(HOST);
});

test("a clean reboot stops the units in order and runs their hooks; disk stays, /run and the GPUs are fresh", async () => {
  const before = await arrange();
  const rebooted = await hosts.reboot(HOST, { kind: "clean" });
  await assertRebooted(before, rebooted);
  assert.equal(await sh("cat /var/lib/reboot-test/probe.stops"), "stopped", "the probe unit's ExecStop ran");
  assert.equal(await sh("cat /var/lib/reboot-test/step.exit"), "ran", "the step's EXIT hook ran");
  hosts.fault(HOST, "{}");
});

test("a power cut stops nothing: no ExecStop, no EXIT hook, the step's partial file stays; disk stays, /run and the GPUs are fresh", async () => {
  const before = await arrange();
  const rebooted = await hosts.reboot(HOST, { kind: "power-cut" });
  await assertRebooted(before, rebooted);
  assert.equal(await sh("cat /var/lib/reboot-test/probe.stops 2>/dev/null || echo none"), "none", "the probe unit's ExecStop never ran");
  assert.equal(await sh("cat /var/lib/reboot-test/step.exit 2>/dev/null || echo none"), "none", "the step's EXIT hook never ran");
  assert.equal(await sh("test -e /var/lib/reboot-test/step.partial && echo left"), "left", "a SIGKILLed step leaves its partial file");
  hosts.fault(HOST, "{}");
});

test("reboot of a host that is not running is refused, saying how to start it", async () => {
  await assert.rejects(hosts.reboot(`${HOST}-none`, { kind: "clean" }), new RegExp(`host ${HOST}-none is not running: start it with npm run simhost -- start ${HOST}-none`));
});
