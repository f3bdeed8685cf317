// Every script the tool runs on a host, and every shell script of the repo, is
// shellcheck-clean (Debian's shellcheck, installed by scripts/setup.sh). The host scripts
// are rendered for the shapes a deployment takes: with and without secrets, node 0 and a
// further node of a group, each drain policy, a renamed unit.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { renderAgentInstall, renderAgentRemoval, renderAgentScript, renderBalancerRemoval, renderBalancerScript, renderBalancerStep } from "../../../components/fleet/render";
import { parseDeployment } from "../../../components/sglang-service/schema";
import { gpuIndices, launchFlags, renderUnit, usesCredentials } from "../../../components/sglang-service/render";
import { helperScripts, renderPreflightScript, renderStageRemoval, renderStageScript, renderTransaction, transactionInput } from "../../../components/sglang-service/script";
import { REPO_ROOT } from "../../../lib/pulumi-env";
import { testStackConfig } from "./stackConfig";

/** shellcheck's findings for named scripts, in one run (a file each in a temp folder), each line prefixed by its script's name. */
function shellcheck(scripts: Record<string, string>): string[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "shellcheck-"));
  try {
    const names = Object.keys(scripts);
    names.forEach((name, i) => fs.writeFileSync(path.join(dir, `${i}.sh`), scripts[name]));
    const r = spawnSync("shellcheck", ["--shell=bash", "--format=gcc", "--severity=style", ...names.map((_, i) => `${i}.sh`)], { cwd: dir, encoding: "utf8" });
    if (r.error) throw new Error(`shellcheck could not run (${r.error.message}): scripts/setup.sh installs it (Debian: apt-get install shellcheck)`);
    return `${r.stdout}${r.stderr}`.split("\n").filter(Boolean).map((l) => l.replace(/^(\d+)\.sh:/, (_, i: string) => `${names[Number(i)]}:`));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function hostScripts(): Record<string, string> {
  const out: Record<string, string> = {};
  const base = testStackConfig("b16t4-w2048");
  const twoNodes = { ...base, nodes: [{ ...(base.host as object), address: "127.0.0.11" }] };
  const shapes: [string, Record<string, unknown>][] = [
    ["b16t4-w2048", testStackConfig("b16t4-w2048")],
    ["b8t4-wnone, drainPolicy proceed, renamed unit", { ...testStackConfig("b8t4-wnone"), timeouts: { drainPolicy: "proceed" }, service: { unitName: "sglang-renamed" } }],
    ["two nodes", twoNodes],
    ["GPUs chosen by CUDA_VISIBLE_DEVICES", { ...base, service: { environment: { CUDA_VISIBLE_DEVICES: "8,9,10,11,12,13,14,15" } } }],
    ["run as sglang", { ...base, service: { runAs: "sglang" } }],
  ];
  for (const [shape, raw] of shapes) {
    const d = parseDeployment(raw, "shellcheck");
    for (const secrets of [{ apiKey: true, hfToken: true }, { apiKey: false, hfToken: false }]) {
      const ranks = d.nodes.length + 1;
      for (let rank = 0; rank < ranks; rank++) {
        const label = `${shape}, ${secrets.apiKey ? "with secrets" : "no secrets"}, rank ${rank}`;
        const transaction = renderTransaction(transactionInput(d, "shellcheck", "sglang (stack shellcheck)", rank, "127.0.0.10", secrets));
        const checked = { label: "l", host: "127.0.0.10", stack: "shellcheck", unitName: d.service.unitName, python: d.service.python, flags: launchFlags(d, secrets), paths: [{ what: "model.path", path: "/models/it's here" }], gpus: gpuIndices(d), bounds: d.timeouts, runAs: d.service.runAs, credentials: secrets.apiKey && usesCredentials(d) };
        out[`transaction (${label})`] = transaction;
        out[`preflight (${label})`] = renderPreflightScript(checked);
        out[`staging (${label})`] = renderStageScript({ ...checked, unitText: renderUnit(d, { stack: "shellcheck", secrets }), transaction, helpers: helperScripts() });
      }
    }
    out[`staging removal (${shape})`] = renderStageRemoval(d.service.unitName, "shellcheck");
  }
  for (const [name, text] of Object.entries(helperScripts())) out[`helper ${name}`] = text;
  // The fleet's balancer host (components/fleet/render.ts).
  const lb = (address: string) => ({ address, hostKey: (base.host as { hostKey: string }).hostKey });
  const fleet = parseDeployment({ ...base, fleet: { replicas: [lb("127.0.0.11"), lb("127.0.0.12")], loadBalancer: { host: lb("127.0.0.13") } } }, "shellcheck");
  out["balancer configuration"] = renderBalancerScript(fleet, "shellcheck");
  out["balancer removal"] = renderBalancerRemoval(fleet, "shellcheck");
  for (const action of ["show", "leave", "rejoin"] as const) out[`balancer ${action}`] = renderBalancerStep(fleet, "shellcheck", action, "replica2", 30);
  // HAProxy's agent check on a replica: the check itself, its installation (which holds it), its removal.
  out["agent check"] = renderAgentScript(fleet, "shellcheck", 1);
  out["agent installation"] = renderAgentInstall(fleet, "shellcheck", 1);
  out["agent removal"] = renderAgentRemoval(fleet, "shellcheck");
  return out;
}

test("every host script the tool renders is shellcheck-clean (all shapes: secrets, ranks, drain policies, a renamed unit)", () => {
  const scripts = hostScripts();
  assert.ok(Object.keys(scripts).length >= 20, Object.keys(scripts).join(", "));
  assert.deepEqual(shellcheck(scripts), []);
});

test("shellcheck finds what it should in a host script (the check can fail)", () => {
  // An unquoted expansion in the transaction is what shellcheck is here for.
  const transaction = Object.entries(hostScripts()).find(([k]) => k.startsWith("transaction"))![1];
  const broken = transaction.replace(/install_unit "\$1"/, "install_unit $1");
  assert.notEqual(broken, transaction);
  assert.match(shellcheck({ broken }).join("\n"), /^broken:\d+:\d+: .*\[SC2086\]/m);
});

test("every shell script of the repo is shellcheck-clean", () => {
  const files = execFileSync("git", ["ls-files", "*.sh"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
  assert.ok(files.includes("scripts/setup.sh"), files.join(", "));
  const r = spawnSync("shellcheck", ["--external-sources", "--source-path=SCRIPTDIR", "--format=gcc", ...files], { cwd: REPO_ROOT, encoding: "utf8" });
  if (r.error) throw new Error(`shellcheck could not run (${r.error.message}): scripts/setup.sh installs it`);
  assert.equal(`${r.stdout}${r.stderr}`, "", `shellcheck in ${path.basename(REPO_ROOT)}`);
  assert.equal(r.status, 0);
});
