// The how-to guides (docs/guides/*.md), each run as written: the commands of its marked block, one
// after the other in one shell, in a fresh clone of this working tree (test/support/freshClone.ts),
// as the README's walkthrough is run (test/readme-walkthrough.test.ts). Then the test checks what
// the guide promises, on the hosts themselves. The three guides run side by side, each in a
// clone of its own (a guide's stack files and state are its own).
//
// Changes to what the guides say, each made where it is named below and nowhere else:
// - the one line of real-host.md and of fleet.md that names the user's own hosts gets the
//   addresses (and key) of simulated hosts this test starts in their stead;
// - sweep.md's `WINNER=` line gets the stack its sweep's answer named, and its host `try2` a
//   name of its own (so that a host of that name the user started is never touched);
// - each clone's Pulumi.yaml gets a short benchmark and a 1 s stability window (speed only: the
//   commands and what they check are the same).
import { after, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import * as hosts from "../../simhost/hosts";
import { REPO_ROOT } from "../../lib/pulumi-env";
import { sudoersFor } from "../../components/sglang-service/become";
import { startLedger, type LedgerReport } from "../../components/fleet/ledger";
import { alive, freshClone, newcomerEnv } from "../support/freshClone";

const MARKER = "<!-- guide-test: test/docs/guides.test.ts runs the lines of the next block -->";
const guide = (name: string) => fs.readFileSync(path.join(REPO_ROOT, "docs", "guides", name), "utf8");

/**
 * Pure: the commands of the ```sh block after the guide-test marker, as a user types them: each
 * line, but a here-document (`<<EOF` to its `EOF` line) is one command with its lines.
 */
function guideCommands(markdown: string): string[] {
  const at = markdown.indexOf(MARKER);
  assert.ok(at >= 0, "no guide-test marker");
  assert.equal(markdown.indexOf(MARKER, at + 1), -1, "more than one guide-test marker");
  const block = /^```sh\n([\s\S]*?)\n```$/m.exec(markdown.slice(at + MARKER.length));
  assert.ok(block && markdown.slice(at + MARKER.length).trimStart().startsWith("```sh"), "no ```sh block right after the guide-test marker");
  const lines = block[1].split("\n");
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const here = /<<-?\s*['"]?(\w+)['"]?\s*$/.exec(lines[i]);
    if (!here) {
      if (lines[i].trim() !== "") out.push(lines[i]);
      continue;
    }
    const end = lines.indexOf(here[1], i + 1);
    assert.ok(end > i, `the here-document of "${lines[i]}" has no ${here[1]} line`);
    out.push(lines.slice(i, end + 1).join("\n"));
    i = end;
  }
  return out;
}

/** Pure: `commands` with the one command that matches `re` replaced by `by` (exactly one must). */
function replaceOne(commands: string[], re: RegExp, by: string): string[] {
  const hits = commands.filter((c) => re.test(c));
  assert.equal(hits.length, 1, `exactly one command matches ${re}: ${hits.join(" | ")}`);
  return commands.map((c) => (re.test(c) ? by : c));
}

interface Step {
  command: string;
  output: string;
}
interface Run {
  code: number | null;
  output: string;
  steps: Step[];
}

/** The shells running a guide's commands, to end (by their process group) if the test ends first. */
const running = new Set<ChildProcess>();
const clones: string[] = [];
const started: string[] = [];

/**
 * Runs `commands` in one bash in `dir` (`set -eo pipefail`: the first failing command ends it),
 * each announced by a line `+++ <its first line>`; `onStep` hears each announcement as the
 * output arrives.
 */
function runCommands(dir: string, commands: string[], onStep?: (command: string) => void): Promise<Run> {
  const script = ["set -eo pipefail", ...commands.flatMap((c) => [`echo ${shellQuote(`+++ ${c.split("\n")[0]}`)}`, c])].join("\n");
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", script], { cwd: dir, env: newcomerEnv(), stdio: ["ignore", "pipe", "pipe"], detached: true });
    running.add(child);
    let output = "";
    let pending = "";
    const take = (d: Buffer) => {
      output += d;
      pending += d;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const l of lines) {
        if (!l.startsWith("+++ ")) continue;
        onStep?.(l.slice(4));
      }
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("error", reject);
    child.on("close", (code) => {
      running.delete(child);
      const steps = output
        .split(/^\+\+\+ /m)
        .slice(1)
        .map((s) => ({ command: s.slice(0, s.indexOf("\n")), output: s.slice(s.indexOf("\n") + 1) }));
      resolve({ code, output, steps });
    });
  });
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The output of the steps whose command starts with `prefix`, in order. */
const outputs = (r: Run, prefix: string) => r.steps.filter((s) => s.command.startsWith(prefix)).map((s) => s.output);

/** The JSON value a step printed (`stack output --json`), whatever notes came before or after it. */
function printedJson(output: string): unknown {
  const start = output.search(/^[[{]/m);
  const end = Math.max(output.lastIndexOf("}"), output.lastIndexOf("]"));
  assert.ok(start >= 0 && end > start, `no JSON in:\n${output}`);
  return JSON.parse(output.slice(start, end + 1));
}

/** A fresh clone whose Pulumi.yaml has a short benchmark and a 1 s stability window. */
function clone(prefix: string): string {
  const dir = freshClone(prefix, (d) => {
    const file = path.join(d, "Pulumi.yaml");
    const doc = YAML.parseDocument(fs.readFileSync(file, "utf8"));
    doc.setIn(["config", "dflash-sglang:benchmark"], doc.createNode({ value: { runs: 1, warmupRuns: 0, maxTokens: 32, longContextTokens: [1024], concurrency: [2], coding: false } }));
    doc.setIn(["config", "dflash-sglang:safety"], doc.createNode({ value: { stableSeconds: 1 } }));
    fs.writeFileSync(file, doc.toString({ lineWidth: 0 }));
  });
  clones.push(dir);
  return dir;
}

const SGLANG = { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 };

async function startHost(name: string, options: hosts.StartOptions = {}): Promise<hosts.HostInfo> {
  started.push(name);
  return hosts.start(name, { sglang: SGLANG, ...options });
}

const tail = (r: Run) => r.output.slice(-8000);

after(async () => {
  for (const child of running) {
    try {
      process.kill(-child.pid!, "SIGTERM");
    } catch {
      // Already gone.
    }
  }
  await Promise.all(started.map((name) => hosts.stop(name)));
  for (const dir of clones) fs.rmSync(dir, { recursive: true, force: true });
});

test("each guide has one marked ```sh block, with the line this test replaces; real-host.md's sudoers lines are the tool's", () => {
  assert.equal(guideCommands(guide("real-host.md")).filter((c) => /^export GPU_HOST=\S+ SSH_KEY=\S+/.test(c)).length, 1);
  assert.equal(guideCommands(guide("fleet.md")).filter((c) => /^export R1=\S+ R2=\S+ R3=\S+ LB=\S+ SSH_KEY=\S+/.test(c)).length, 1);
  assert.equal(guideCommands(guide("sweep.md")).filter((c) => /^WINNER=\S+/.test(c)).length, 1);
  assert.ok(guide("real-host.md").includes(`\`\`\`\n${sudoersFor("deploy")}\`\`\``), "real-host.md shows become.ts sudoersFor(\"deploy\") as its sudoers file");
  // A here-document is one command; a marker without its block is refused.
  assert.deepEqual(guideCommands(`${MARKER}\n\`\`\`sh\na\ncat > f <<EOF\nx: $A\n\nEOF\n\nb\n\`\`\`\n`), ["a", "cat > f <<EOF\nx: $A\n\nEOF", "b"]);
  assert.throws(() => guideCommands(`${MARKER}\ntext\n\`\`\`sh\na\n\`\`\`\n`), /no ```sh block right after/);
});

describe("the guides, run as written in fresh clones against simulated hosts", { concurrency: true }, () => {
  test("real-host.md: a host where root cannot log in, through sudo, with an API key: preview, up, the key required, a change and back, destroy", { timeout: 600_000 }, async () => {
    const host = await startHost(`guide-gpu-${process.pid}`, { sudoers: sudoersFor("deploy") });
    assert.equal(host.user, "deploy");
    const commands = replaceOne(guideCommands(guide("real-host.md")), /^export GPU_HOST=\S+ SSH_KEY=\S+/, `export GPU_HOST=${host.address} SSH_KEY=${host.privateKeyPath}`);
    const r = await runCommands(clone("guide-real-host-"), commands);
    assert.equal(r.code, 0, `the guide stopped:\n${tail(r)}`);
    const at = esc(host.address);
    assert.match(outputs(r, "npx pulumi preview")[0], new RegExp(`sglang-k26 on ${at}: not installed yet; \`up\` installs this stack's unit`), tail(r));
    // Served as configured, and only with the key.
    const args = printedJson(outputs(r, "npx pulumi stack output --json")[0]) as Record<string, unknown>;
    assert.deepEqual([args.speculative_algorithm, args.speculative_ddtree_budget, args.speculative_ddtree_topk, args.speculative_draft_window_size], ["DDTREE", 16, 4, 2048]);
    const [without, withKey] = outputs(r, "curl ");
    assert.equal(without.trim(), "401", "without the key the server refuses");
    assert.match(withKey, /"id":"\/models\/Kimi-K2\.6"/, "with it, it answers");
    // The change and the way back: each a restart proven on the host, the unit's line changed.
    const ups = outputs(r, "npx pulumi up ");
    assert.equal(ups.length, 3);
    ups.forEach((u, i) => assert.match(u, new RegExp(`proven: generation ${i + 1} on ${at} is the known-good configuration now`), u.slice(-3000)));
    assert.match(ups[1], /-\s+--speculative-ddtree-budget 16 \\\n\s+\+\s+--speculative-ddtree-budget 8 \\/);
    assert.match(ups[2], /-\s+--speculative-ddtree-budget 8 \\\n\s+\+\s+--speculative-ddtree-budget 16 \\/);
    // What the guide says of the key: `up` warns, and the unit's journal on the host holds it in clear.
    assert.match(ups[0], /SGLang logs its start-up arguments, API key included, so the journal of sglang-k26 on \S+ holds the key in clear/);
    const journal = (await hosts.ssh(host, "journalctl -u sglang-k26 -o cat --no-pager")).stdout;
    const key = /'api_key': '([0-9a-f]{64})'/.exec(journal)?.[1];
    assert.ok(key, "the journal holds the API key the guide made (openssl rand -hex 32)");
    assert.ok(!r.output.includes(key), "no command of the guide printed the key");
    // Every host step went through the one sudo command the guide's sudoers file allows.
    const sudo = (await hosts.ssh(host, "journalctl -q --no-pager -o cat SYSLOG_IDENTIFIER=sudo")).stdout.split("\n").filter((l) => /^\s*deploy : PWD=/.test(l));
    assert.ok(sudo.length >= 4, sudo.join("\n"));
    assert.deepEqual([...new Set(sudo.map((l) => l.replace(/^.*; USER=/, "USER=")))], ["USER=root ; COMMAND=/usr/bin/bash -s"]);
    // Destroyed: nothing of the stack left on the host; the stack file kept, the key encrypted in it.
    assert.equal((await hosts.ssh(host, "systemctl is-active sglang-k26.service; ls /etc/systemd/system/sglang-k26.service /etc/dflash-sglang/sglang-k26.* 2>/dev/null; true")).stdout.trim(), "inactive");
    assert.match(outputs(r, "npx pulumi stack rm")[0], /keeping the stack's settings file in stacks\//);
  });

  test("fleet.md: three replicas behind HAProxy: up, served through the balancer, a rollout one replica at a time with clients answered", { timeout: 600_000 }, async () => {
    const hs = await Promise.all(["r1", "r2", "r3", "lb"].map((n) => startHost(`guide-fleet-${n}-${process.pid}`)));
    // One key for the four, as a real fleet's hosts take the operator's: the first host's.
    const pub = execFileSync("ssh-keygen", ["-y", "-f", hs[0].privateKeyPath], { encoding: "utf8" }).trim();
    for (const h of hs.slice(1)) assert.equal((await hosts.ssh(h, `echo '${pub}' >> /root/.ssh/authorized_keys`)).code, 0);
    const [r1, r2, r3, lb] = hs.map((h) => h.address);
    const commands = replaceOne(guideCommands(guide("fleet.md")), /^export R1=\S+ R2=\S+ R3=\S+ LB=\S+ SSH_KEY=\S+/, `export R1=${r1} R2=${r2} R3=${r3} LB=${lb} SSH_KEY=${hs[0].privateKeyPath}`);
    // Clients through the balancer during the rollout: the second `up`, until the next command starts.
    const rollout = "npx pulumi up --yes --stack fleet";
    let ledger: ReturnType<typeof startLedger> | undefined;
    let report: Promise<LedgerReport> | undefined;
    let ups = 0;
    const r = await runCommands(clone("guide-fleet-"), commands, (command) => {
      if (ledger && !report) report = ledger.stop();
      if (command.startsWith(rollout) && ++ups === 2) ledger = startLedger({ baseUrl: `http://${lb}:8080`, model: "/models/Kimi-K2.6", perSecond: 2, streamEvery: 3, maxTokens: 64, timeoutMs: 60_000 });
    });
    if (ledger && !report) report = ledger.stop();
    assert.equal(r.code, 0, `the guide stopped:\n${tail(r)}`);
    const [first, second] = outputs(r, rollout);
    assert.match(first, new RegExp(`fleet of stack fleet: 3 replicas behind its own HAProxy dflash-balancer-fleet\\.service \\(/etc/dflash-sglang/balancer/fleet\\.cfg\\) on ${esc(lb)}, not there yet; nothing else on that host is touched \\(clients: http://${esc(lb)}:8080\\).*never fewer than 2 serving`));
    assert.match(outputs(r, "curl ")[0], /"id":"\/models\/Kimi-K2\.6"/, "served through the balancer");
    const [before, afterwards] = outputs(r, "npx pulumi preview");
    for (const a of [r1, r2, r3]) {
      assert.match(before, new RegExp(`replica-${esc(a)} \\(${esc(a)}:30001\\): serving in the balancer`));
      assert.match(afterwards, new RegExp(`replica-${esc(a)} \\(${esc(a)}:30001\\): serving in the balancer`));
    }
    assert.doesNotMatch(afterwards, /to update|to create|to replace/, "after the rollout, nothing is left to change");
    // One replica at a time: each leaves and is back before the next leaves.
    const events = [...second.matchAll(/replica-(\S+) (left the balancer|is back in the balancer and serving)/g)].map((m) => `${m[1]} ${m[2].startsWith("left") ? "out" : "in"}`);
    const firsts = events.filter((e, k) => events.indexOf(e) === k);
    assert.deepEqual(firsts, [r1, r2, r3].flatMap((a) => [`${a} out`, `${a} in`]), second.slice(-3000));
    const clients = await report!;
    assert.deepEqual({ failed: clients.failed, cut: clients.cut }, { failed: 0, cut: 0 }, JSON.stringify(clients.problems));
    assert.ok(clients.completed >= 5, `only ${clients.completed} requests completed during the rollout`);
    // The new configuration on every replica, as each server says, and each serving in HAProxy's own view.
    const replicas = printedJson(outputs(r, "npx pulumi stack output --json")[0]) as { generation: number }[];
    assert.deepEqual(replicas.map((x) => x.generation), [2, 2, 2]);
    for (const a of [r1, r2, r3]) {
      const info = (await (await fetch(`http://${a}:30001/server_info`)).json()) as Record<string, unknown>;
      assert.equal(info.speculative_ddtree_budget, 16, a);
    }
    const stat = (await hosts.ssh(hs[3], "echo 'show stat' | socat stdio /run/dflash-balancer-fleet/admin.sock")).stdout.split("\n");
    const head = stat[0].replace(/^# /, "").split(",");
    const rows = stat.slice(1).map((l) => l.split(",")).filter((c) => c[head.indexOf("svname")]?.startsWith("replica-"));
    assert.deepEqual(rows.map((c) => `${c[head.indexOf("svname")]} ${c[head.indexOf("status")]}`).sort(), [r1, r2, r3].map((a) => `replica-${a} UP`).sort());
  });

  test("sweep.md: a sweep on one simulated host names a best or a tie; the winner, copied to a stack of its own, is up and in the report", { timeout: 600_000 }, async () => {
    // Hosts of earlier runs of this test that were killed before they could stop theirs (the
    // guide's host is a kept one, which nothing reclaims): their pid is gone.
    for (const h of hosts.status()) {
      const pid = Number(/^guide-try-(\d+)$/.exec(h.name)?.[1]);
      if (pid && pid !== process.pid && !alive(pid)) await hosts.stop(h.name);
    }
    const tryHost = `guide-try-${process.pid}`;
    started.push(tryHost);
    const commands = guideCommands(guide("sweep.md")).map((c) => c.replace(/\btry2\b/g, tryHost));
    const split = commands.findIndex((c) => /^WINNER=\S+/.test(c));
    assert.ok(split > 0);
    const dir = clone("guide-sweep-");
    const sweep = await runCommands(dir, commands.slice(0, split));
    assert.equal(sweep.code, 0, `the sweep stopped:\n${tail(sweep)}`);
    assert.match(sweep.output, /sweeping 4 configurations over 1 host\(s\)/);
    for (const s of ["b16t4-wnone", "b4t4-wnone", "b8t4-wnone", "baseline"]) assert.match(sweep.output, new RegExp(`\\] ${s}: done in `), s);
    // The answer: a best, or a tie whose first has the highest estimate.
    const answer = fs.readFileSync(path.join(dir, "bench", "out", "sweep-report.md"), "utf8");
    const m = /\*\*Best: ([\w.-]+)\*\*/.exec(answer) ?? /\*\*Tie: ([\w.-]+)(?:, [\w.-]+)* \((?:equal within [\d.]+ %|inconclusive)\)\*\*/.exec(answer);
    assert.ok(m, `the sweep's report names no best and no tie:\n${answer}`);
    const winner = m[1];
    assert.match(winner, /-wnone$/, "the baseline is never the answer");
    const row = new RegExp(`^\\| (?:\\*\\*${esc(winner)}\\*\\* \\(best\\)|${esc(winner)} \\(tie\\)) \\| ([^|]+) \\|`, "m").exec(answer);
    assert.ok(row, `the winner's row is marked:\n${answer}`);

    const promote = await runCommands(dir, replaceOne(commands.slice(split), /^WINNER=\S+/, `WINNER=${winner}`));
    assert.equal(promote.code, 0, `the promotion stopped:\n${tail(promote)}`);
    const spec = (name: string) => (YAML.parse(fs.readFileSync(path.join(dir, "stacks", `Pulumi.${name}.yaml`), "utf8")) as { config: Record<string, unknown> }).config["dflash-sglang:speculative"];
    assert.deepEqual(spec("tuned"), spec(winner));
    const address = hosts.status().find((h) => h.name === tryHost)?.address;
    assert.ok(address, "the guide's host runs");
    assert.match(outputs(promote, "npx pulumi up ")[0], new RegExp(`proven: generation 1 on ${esc(address)} is the known-good configuration now`));
    // The report has the promoted stack's numbers, in the winner's configuration.
    const report = fs.readFileSync(path.join(dir, "bench", "out", "report.md"), "utf8");
    assert.match(report, new RegExp(`^\\| tuned \\| ${esc(row[1].trim())} \\| \\d`, "m"), report);
  });
});
