// Pure: what the fleet's balancer host receives. HAProxy's configuration (one frontend, one
// backend of the replicas, health checks that ask each replica to generate) and the host
// scripts that put it in place and drive HAProxy's runtime API (host/balancer*.sh).
import { agentPortOf, Deployment, Fleet, minHealthyOf } from "../sglang-service/schema";
import { createHash } from "node:crypto";
import { renderHostScript } from "../sglang-service/hostScript";
import { localServerUrl, secretPaths } from "../sglang-service/render";

/**
 * Where this stack's own HAProxy keeps its files on the balancer host. The balancer host is
 * shared (other services, other fleets): each fleet stack runs its own HAProxy instance, a
 * unit, a configuration, a runtime API socket and a state of its own, and writes nothing else
 * there (an earlier version wrote Debian's /etc/haproxy/haproxy.cfg: LEGACY_BALANCER, which
 * `up` migrates from). Stack names hold only letters, digits, "-", "_" and ".".
 */
export function balancerPaths(stack: string) {
  const id = stack.replace(/[^A-Za-z0-9_.-]/g, "_");
  const run = `/run/dflash-balancer-${id}`;
  const state = `/var/lib/dflash-sglang/balancer/${id}`;
  return {
    unitName: `dflash-balancer-${id}.service`,
    unit: `/etc/systemd/system/dflash-balancer-${id}.service`,
    configDir: "/etc/dflash-sglang/balancer",
    config: `/etc/dflash-sglang/balancer/${id}.cfg`,
    /** The unit's RuntimeDirectory (made at start, removed at stop). */
    runDir: run,
    socket: `${run}/admin.sock`,
    masterSocket: `${run}/master.sock`,
    /** The servers' runtime states (drained, ready) across reloads and restarts, and which replicas this stack put in (joined/) or took out (left/). */
    stateDir: state,
    stateFile: `${state}/server-state`,
    /** Held by a leave while it counts the others and drains (host/balancer-step.sh). */
    lock: `/run/dflash-balancer-${id}.lock`,
  } as const;
}

/** Where HAProxy's agent check of this stack lives on each replica (host/agent*.sh). */
export function agentPaths(stack: string) {
  const id = stack.replace(/[^A-Za-z0-9_.-]/g, "_");
  return {
    socketUnit: `dflash-agent-${id}.socket`,
    socket: `/etc/systemd/system/dflash-agent-${id}.socket`,
    /** The template each connection runs (Accept=yes). */
    service: `/etc/systemd/system/dflash-agent-${id}@.service`,
    dir: `/var/lib/dflash-sglang/agent/${id}`,
  } as const;
}

/** Seconds the agent gives its generation (within HAProxy's `timeout check`, 20 s). */
const AGENT_GENERATION_SECONDS = 10;

/** Pure: the agent check of replica k (host/agent.sh): its local server, the model, the stack's API key header file. */
export function renderAgentScript(d: Deployment, stack: string, k: number): string {
  const rd = replicaDeployment(d, k);
  const body = JSON.stringify({ model: d.model.servedModelName ?? d.model.path, messages: [{ role: "user", content: "Say OK" }], max_tokens: 4, temperature: 0 });
  return renderHostScript({
    about: [`dflash-sglang: HAProxy's agent check of ${d.service.unitName} (stack ${stack}) on ${rd.host.address}.`],
    set: "-uo pipefail",
    values: { url: `${localServerUrl(rd)}/v1/chat/completions`, body, seconds: AGENT_GENERATION_SECONDS, curl_headers: secretPaths(d.service.unitName).curlHeaders },
    files: ["agent.sh"],
    component: { folder: "fleet", renderer: "render.ts" },
  });
}

/** Pure: the agent's socket unit on replica k: its address and the agent port, a connection each (Accept=yes), at most 4 at once. */
export function renderAgentSocket(d: Deployment, stack: string, k: number): string {
  const rd = replicaDeployment(d, k);
  return [
    `# HAProxy's agent check of the SGLang fleet of stack ${stack} on this replica.`,
    "# Rendered by dflash-sglang (components/fleet/render.ts); `pulumi up` replaces it: do not edit.",
    "[Unit]",
    `Description=HAProxy agent check of the SGLang fleet of stack ${stack} (dflash-sglang)`,
    "",
    "[Socket]",
    `ListenStream=${urlHostPort(rd.service.listenAddress, agentPortOf(d))}`,
    "Accept=yes",
    "MaxConnections=4",
    "FreeBind=yes",
    "",
    "[Install]",
    "WantedBy=sockets.target",
    "",
  ].join("\n");
}

/** Pure: the service each agent connection runs (host/agent.sh); systemd's own lines about each run are not logged (LogLevelMax). */
export function renderAgentService(stack: string): string {
  const p = agentPaths(stack);
  return [
    `# One agent check of the SGLang fleet of stack ${stack} (a connection of ${p.socketUnit}).`,
    "# Rendered by dflash-sglang (components/fleet/render.ts); `pulumi up` replaces it: do not edit.",
    "[Unit]",
    `Description=HAProxy agent check of the SGLang fleet of stack ${stack} (dflash-sglang)`,
    "",
    "[Service]",
    `ExecStart=/bin/bash ${p.dir}/agent.sh`,
    "StandardInput=socket",
    "StandardOutput=socket",
    "StandardError=journal",
    "RuntimeMaxSec=30",
    "LogLevelMax=notice",
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "",
  ].join("\n");
}

/** Pure: installs (or updates) the agent on replica k (host/agent-install.sh). */
export function renderAgentInstall(d: Deployment, stack: string, k: number): string {
  const p = agentPaths(stack);
  const rd = replicaDeployment(d, k);
  const a = rd.service.listenAddress;
  return renderHostScript({
    about: [`dflash-sglang: installs HAProxy's agent check of stack ${stack} on ${rd.host.address}.`],
    set: "-uo pipefail",
    values: {
      socket_unit: p.socketUnit,
      socket_path: p.socket,
      service_path: p.service,
      agent_dir: p.dir,
      agent_script: { text: renderAgentScript(d, stack, k) },
      socket_text: { text: renderAgentSocket(d, stack, k) },
      service_text: { text: renderAgentService(stack) },
      listen_host: a === "0.0.0.0" ? "127.0.0.1" : a === "::" ? "::1" : a,
      listen_port: agentPortOf(d),
      command_seconds: Math.ceil(d.timeouts.commandSeconds),
    },
    files: ["agent-install.sh"],
    component: { folder: "fleet", renderer: "render.ts" },
  });
}

/** Pure: removes the agent of this stack from a replica (host/agent-remove.sh). */
export function renderAgentRemoval(d: Deployment, stack: string): string {
  const p = agentPaths(stack);
  return renderHostScript({
    about: [`dflash-sglang: removes HAProxy's agent check of stack ${stack}.`],
    set: "-uo pipefail",
    values: { socket_unit: p.socketUnit, socket_path: p.socket, service_path: p.service, agent_dir: p.dir, command_seconds: Math.ceil(d.timeouts.commandSeconds) },
    files: ["agent-remove.sh"],
    component: { folder: "fleet", renderer: "render.ts" },
  });
}

/** What an earlier version of this tool wrote: Debian's own HAProxy, its configuration replaced whole. */
export const LEGACY_BALANCER = {
  unitName: "haproxy.service",
  config: "/etc/haproxy/haproxy.cfg",
  socket: "/run/haproxy/admin.sock",
  stateFile: "/var/lib/haproxy/dflash-server-state",
} as const;

/** Pure: the first line of the configuration an earlier version wrote for `stack` (how `up` knows that haproxy.cfg is its own). */
export function legacyConfigHead(stack: string): string {
  return `# HAProxy for the SGLang fleet of stack ${stack} (`;
}

/** The backend (and frontend) name in HAProxy's configuration. */
export const BACKEND = "sglang";

/** A replica as the balancer knows it: its server name and where it serves. */
export interface Replica {
  /** 1-based: replica 1 is the stack's `host`. */
  index: number;
  /** HAProxy's server name (serverName): replica-10.0.0.6, ... */
  server: string;
  address: string;
  /** The SGLang server's port (service.port). */
  port: number;
}

/**
 * Pure: a replica's name in HAProxy (and of its resources), from where it is: a replica keeps
 * its name, its saved state and its resources when others are added, removed or reordered
 * (a name by position would hand one replica's resources, whose delete tears a unit down, to
 * another). Characters HAProxy's names do not take become "_"; the SSH port is added where it
 * is not 22 (two replicas may share an address).
 */
export function serverName(host: { address: string; port: number }): string {
  return `replica-${host.address.replace(/[^A-Za-z0-9.-]/g, "_")}${host.port === 22 ? "" : `-p${host.port}`}`;
}

/** Pure: the fleet's replicas, `host` first, each serving on service.port. */
export function replicasOf(d: Deployment): Replica[] {
  if (!d.fleet) return [];
  return [d.host, ...d.fleet.replicas].map((h, k) => ({ index: k + 1, server: serverName(h), address: h.address, port: d.service.port }));
}

/**
 * Pure: replica k's deployment (0: the stack's own `host`): its host, and SGLang listening where
 * HAProxy reaches it: a wildcard listen address stays one; a specific one (127.0.0.1 by default)
 * becomes the replica's own address, as for a group's nodes.
 */
export function replicaDeployment(d: Deployment, k: number): Deployment {
  if (!d.fleet) throw new Error("replicaDeployment: the deployment has no fleet");
  const host = k === 0 ? d.host : d.fleet.replicas[k - 1];
  const a = d.service.listenAddress;
  const listenAddress = a === "0.0.0.0" || a === "::" ? a : host.address;
  // The server's own drain follows the fleet's policy (schema.ts fleet.drainPolicy).
  const drainPolicy = d.fleet.drainPolicy === "cut" ? "proceed" : "fail";
  return { ...d, host, service: { ...d.service, listenAddress }, timeouts: { ...d.timeouts, drainPolicy }, fleet: undefined };
}

/** Pure: the address and port clients reach the fleet on. */
export function frontendOf(f: Fleet): { address: string; port: number } {
  return { address: f.loadBalancer.listenAddress ?? f.loadBalancer.host.address, port: f.loadBalancer.port };
}

/** An address and port as HAProxy's `bind` and `server` lines take them (an IPv6 address bare: the last colon ends it). */
function hostPort(address: string, port: number): string {
  return `${address.replace(/^\[(.*)\]$/, "$1")}:${port}`;
}

/** Pure: an address and port in a URL (an IPv6 address in brackets). */
export function urlHostPort(address: string, port: number): string {
  const bare = address.replace(/^\[(.*)\]$/, "$1");
  return bare.includes(":") ? `[${bare}]:${port}` : `${bare}:${port}`;
}

/** Pure: HAProxy's check intervals while a server changes state (fastinter, downinter): at most 250 ms, so that a replica back from its restart serves again within a second. */
function fastCheckMs(f: Fleet): number {
  return Math.min(250, Math.round(f.loadBalancer.checkSeconds * 1000));
}

/**
 * Pure: HAProxy's configuration for the fleet, for this stack's own HAProxy instance
 * (balancerPaths). Deterministic (a preview shows only real changes). Requests are balanced per
 * request to the replica with the fewest (`leastconn`: generations differ in length by orders
 * of magnitude); a replica receives requests only while its health check, a one-token
 * generation (`/health_generate`: SGLang refuses connections while it loads, and answers 503
 * until warmed up and while it drains), passes. A connection refused (a replica that just went
 * down) is retried, the last retry on another replica (`retries 3`, `option redispatch`:
 * HAProxy retries only where nothing was sent). Responses, streamed ones included, pass through
 * as they come (HAProxy buffers no body, and `http-no-delay` keeps it from holding small writes
 * back to merge them).
 *
 * Every server starts `disabled` (in maintenance): a replica added to the fleet gets no client
 * request before its rollout has proven it serves this configuration and put it in (`state
 * ready`, host/balancer-step.sh rejoin); the states saved in the server-state-file keep those
 * already in across reloads and restarts (host/balancer.sh keeps them consistent).
 * `description` carries the hash of the rest of the text: the runtime API's `show info` says
 * which configuration the running worker loaded (host/balancer.sh checks it after each reload).
 */
export function renderHaproxyConfig(d: Deployment, stack: string): string {
  const body = haproxyBody(d, stack);
  return body.replace("\n    description -\n", `\n    description ${balancerDescription(configHash(body))}\n`);
}

/** Pure: the sha256 (hex) that names a configuration: of its text with `description -`. */
function configHash(body: string): string {
  return createHash("sha256").update(body).digest("hex");
}

/** Pure: the `description` of a configuration whose hash is `hash` (what `show info` answers). */
export function balancerDescription(hash: string): string {
  return `dflash-sglang config sha256:${hash}`;
}

/** Pure: the hash `renderHaproxyConfig` writes into the configuration's description. */
export function haproxyConfigHash(d: Deployment, stack: string): string {
  return configHash(haproxyBody(d, stack));
}

function haproxyBody(d: Deployment, stack: string): string {
  const f = d.fleet;
  if (!f) throw new Error("renderHaproxyConfig: the deployment has no fleet");
  const p = balancerPaths(stack);
  const front = frontendOf(f);
  const inter = `${Math.round(f.loadBalancer.checkSeconds * 1000)}ms`;
  const fast = `${fastCheckMs(f)}ms`;
  const slow = f.loadBalancer.slowstartSeconds > 0 ? ` slowstart ${Math.round(f.loadBalancer.slowstartSeconds * 1000)}ms` : "";
  const lines = [
    `# HAProxy of the SGLang fleet of stack ${stack} (${d.service.unitName} on ${f.replicas.length + 1} replicas): ${p.unitName}.`,
    "# Rendered by dflash-sglang (components/fleet/render.ts); `pulumi up` replaces it: do not edit.",
    "global",
    "    log /dev/log local0",
    "    chroot /var/lib/haproxy",
    `    stats socket ${p.socket} mode 600 level admin`,
    "    stats timeout 30s",
    "    user haproxy",
    "    group haproxy",
    // The servers' runtime states (drained, ready) survive a reload and a restart: host/balancer-api.sh saves them.
    `    server-state-file ${p.stateFile}`,
    "    description -",
    "",
    "defaults",
    "    log global",
    "    mode http",
    "    option httplog",
    "    option dontlognull",
    // Each token leaves as it comes: no merging of small writes (a stream's chunks are small).
    "    option http-no-delay",
    "    option redispatch",
    "    retries 3",
    "    timeout connect 5s",
    `    timeout client ${Math.round(f.loadBalancer.requestSeconds)}s`,
    `    timeout server ${Math.round(f.loadBalancer.requestSeconds)}s`,
    "    timeout queue 60s",
    // A check is a generation: as long as SGLang's own health check waits for one (SGLANG_HEALTH_CHECK_TIMEOUT, 20 s).
    "    timeout check 20s",
    "    load-server-state-from-file global",
    "",
    `frontend ${BACKEND}`,
    `    bind ${hostPort(front.address, front.port)}`,
    `    default_backend ${BACKEND}`,
    "",
    `backend ${BACKEND}`,
    "    balance leastconn",
    "    option httpchk",
    "    http-check send meth GET uri /health_generate",
    "    http-check expect status 200",
    // Checked every `inter`; while a server changes state (down, coming back) every `fast`: a
    // replica back from its restart is seen serving within a second.
    `    default-server check inter ${inter} fastinter ${fast} downinter ${fast} fall 2 rise 2${slow} agent-check agent-port ${agentPortOf(d)} agent-inter ${inter} disabled`,
    ...replicasOf(d).map((r) => `    server ${r.server} ${hostPort(r.address, r.port)}`),
    "",
  ];
  return lines.join("\n");
}

/**
 * Pure: the systemd unit of this stack's HAProxy (Debian's haproxy.service, with this stack's
 * files): master-worker (`-Ws`), so a reload starts a new worker on the new configuration while
 * the old one finishes its requests. The reload signal is SIGUSR2 by number: procps's `kill`
 * refuses signal names under a Turkish locale.
 */
export function renderBalancerUnit(stack: string): string {
  const p = balancerPaths(stack);
  const run = p.runDir.replace(/^\/run\//, "");
  return [
    `# HAProxy of the SGLang fleet of stack ${stack}.`,
    "# Rendered by dflash-sglang (components/fleet/render.ts); `pulumi up` replaces it: do not edit.",
    "[Unit]",
    `Description=HAProxy of the SGLang fleet of stack ${stack} (dflash-sglang)`,
    "Documentation=man:haproxy(1)",
    "After=network-online.target",
    "Wants=network-online.target",
    "",
    "[Service]",
    `Environment=CONFIG=${p.config}`,
    `RuntimeDirectory=${run}`,
    // HAProxy logs to /dev/log from inside its chroot (as Debian's haproxy.service has it).
    "BindReadOnlyPaths=/dev/log:/var/lib/haproxy/dev/log",
    "ExecStartPre=/usr/sbin/haproxy -Ws -f ${CONFIG} -c -q",
    `ExecStart=/usr/sbin/haproxy -Ws -f \${CONFIG} -p ${p.runDir}/haproxy.pid -S ${p.masterSocket}`,
    "ExecReload=/usr/sbin/haproxy -Ws -f ${CONFIG} -c -q",
    "ExecReload=/bin/kill -12 $MAINPID",
    "KillMode=mixed",
    "Restart=always",
    "SuccessExitStatus=143",
    "Type=notify",
    "",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  ].join("\n");
}

/** Pure: the values every balancer script starts with: where it runs, and this stack's HAProxy's runtime API and states (host/balancer-api.sh). */
function common(d: Deployment, stack: string) {
  const f = d.fleet!;
  const p = balancerPaths(stack);
  return { balancer: `${f.loadBalancer.host.address}:${f.loadBalancer.host.port}`, socket: p.socket, state_file: p.stateFile, state_dir: p.stateDir, command_seconds: Math.ceil(d.timeouts.commandSeconds) };
}

/** Pure: the values of host/balancer-listen.sh: where this stack listens, what else is its, and what an earlier version wrote. */
function listening(d: Deployment, stack: string) {
  const p = balancerPaths(stack);
  const front = frontendOf(d.fleet!);
  return {
    unit_name: p.unitName,
    config_path: p.config,
    config_dir: p.configDir,
    listen_address: front.address.replace(/^\[(.*)\]$/, "$1"),
    listen_port: front.port,
    legacy_unit: LEGACY_BALANCER.unitName,
    legacy_config: LEGACY_BALANCER.config,
    legacy_socket: LEGACY_BALANCER.socket,
    legacy_head: legacyConfigHead(stack),
  };
}

/** Pure: how long a HAProxy this stack stops (its own removed, an earlier version's replaced) may finish its requests. */
const drainSecondsOf = (d: Deployment) => Math.ceil(d.timeouts.drainSeconds);

/** Pure: the script that puts this stack's HAProxy in place and (re)loads it, checked (host/balancer.sh). */
export function renderBalancerScript(d: Deployment, stack: string): string {
  const p = balancerPaths(stack);
  return renderHostScript({
    about: [`dflash-sglang: HAProxy of the fleet of stack ${stack}.`],
    set: "-uo pipefail",
    values: {
      ...common(d, stack),
      ...listening(d, stack),
      stack,
      backend: BACKEND,
      unit_path: p.unit,
      config_hash: haproxyConfigHash(d, stack),
      drain_seconds: drainSecondsOf(d),
      config_text: { text: renderHaproxyConfig(d, stack) },
      unit_text: { text: renderBalancerUnit(stack) },
    },
    files: ["balancer-api.sh", "balancer-listen.sh", "balancer.sh"],
    component: { folder: "fleet", renderer: "render.ts" },
  });
}

/** Pure: the script that removes this stack's HAProxy and its files, and nothing else (host/balancer-remove.sh). */
export function renderBalancerRemoval(d: Deployment, stack: string): string {
  const p = balancerPaths(stack);
  return renderHostScript({
    about: [`dflash-sglang: removes the HAProxy of the fleet of stack ${stack}.`],
    set: "-uo pipefail",
    values: { command_seconds: Math.ceil(d.timeouts.commandSeconds), socket: p.socket, state_file: p.stateFile, unit_name: p.unitName, unit_path: p.unit, config_path: p.config, state_dir: p.stateDir, lock_file: p.lock, drain_seconds: drainSecondsOf(d) },
    files: ["balancer-api.sh", "balancer-remove.sh"],
    component: { folder: "fleet", renderer: "render.ts" },
  });
}

export type BalancerAction = "show" | "leave" | "rejoin";

/** Pure: one rollout step on the balancer (host/balancer-step.sh); `server` is ignored by `show`. */
export function renderBalancerStep(d: Deployment, stack: string, action: BalancerAction, server = "", waitSeconds = 0, unitHash = ""): string {
  const f = d.fleet!;
  return renderHostScript({
    about: [`dflash-sglang: the fleet's balancer (stack ${stack}), ${action}${server ? ` ${server}` : ""}.`],
    set: "-uo pipefail",
    values: {
      ...common(d, stack),
      ...listening(d, stack),
      action,
      backend: BACKEND,
      server,
      min_healthy: minHealthyOf(f),
      // Each replica's agent (host/agent.sh), which the leave asks whether it generates now.
      agent_port: agentPortOf(d),
      wait_seconds: Math.ceil(waitSeconds),
      poll: (d.timeouts.pollMs / 1000).toFixed(3),
      lock_file: balancerPaths(stack).lock,
      operator_states: f.loadBalancer.operatorStates,
      // fleet.drainPolicy "halt": a leave past its wait with requests open halts the rollout.
      halt_on_open: f.drainPolicy === "halt",
      unit_hash: unitHash,
    },
    files: ["balancer-api.sh", "balancer-servers.sh", "balancer-listen.sh", "balancer-step.sh"],
    component: { folder: "fleet", renderer: "render.ts" },
  });
}

/** A server's line from `show` (host/balancer-servers.sh servers), with what this stack's marks say of it. */
export interface ServerState {
  server: string;
  address: string;
  op: number;
  admin: number;
  sessions: number;
  queued: number;
  status: string;
  check: string;
  /** This stack put it in the balancer (a rejoin), once or more. */
  joined: boolean;
  /** A rollout of this stack took it out and has not put it back. */
  left: boolean;
  /** When this stack last put it in: the unit hash it ran then ("unknown" after a failed restart) and the time; null where it never did (or an earlier version did). */
  lastJoined: { unitHash: string; at: string } | null;
}

/** This stack's HAProxy on the balancer host, as `show` read it (host/balancer-step.sh). */
export interface BalancerView {
  /** The servers; null where no HAProxy of this stack (nor the one an earlier version wrote) answers. */
  servers: ServerState[] | null;
  /** systemctl is-active of this stack's unit ("active", "inactive", "failed", ...). */
  instance: string;
  /** The hash in the configuration file on the host ("absent": none). */
  config: string;
  /** The hash of the configuration the running worker loaded ("none": it does not answer). */
  running: string;
  listening: boolean;
  /** Whether it has saved servers' states (a balancer host rebuilt, or never configured, has none). */
  states: boolean;
  /** What else listens on (or is configured for) the stack's address and port, in words. */
  conflicts: string[];
  /** Debian's haproxy.service runs (or ran) the configuration an earlier version wrote for this stack: its is-active, or null. */
  legacy: string | null;
}

const LINE = /^(\S+) (\S+) op=(\d+) admin=(\d+) scur=(\d+) qcur=(\d+) status=(\S*) check=(\S*)$/;

/** Pure: what a `show` printed. */
export function parseBalancer(stdout: string): BalancerView {
  const lines = stdout.split("\n").map((l) => l.trim());
  const tag = (t: string) => lines.filter((l) => l.startsWith(`@@${t} `) || l === `@@${t}`).map((l) => l.slice(t.length + 3));
  const joinedMarks = new Map(tag("joined").map((t) => t.split(" ")).map(([name, unitHash, at]) => [name, unitHash && at ? { unitHash, at } : null]));
  const joined = new Set(joinedMarks.keys());
  const left = new Set(tag("left"));
  const servers = lines
    .map((l) => LINE.exec(l))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ server: m[1], address: m[2], op: Number(m[3]), admin: Number(m[4]), sessions: Number(m[5]), queued: Number(m[6]), status: m[7].replaceAll("_", " "), check: m[8], joined: joined.has(m[1]), left: left.has(m[1]), lastJoined: joinedMarks.get(m[1]) ?? null }));
  return {
    servers: lines.includes("@@absent") ? null : servers,
    instance: tag("instance")[0] || "absent",
    config: tag("config")[0] || "absent",
    running: tag("running")[0] || "none",
    listening: tag("listening")[0] === "yes",
    states: tag("states")[0] === "yes",
    conflicts: tag("conflict"),
    legacy: tag("legacy")[0] ?? null,
  };
}

/** Pure: the servers a `show` printed; null where HAProxy did not answer (not configured yet). */
export function parseServers(stdout: string): ServerState[] | null {
  return parseBalancer(stdout).servers;
}

/** How a replica stands in the balancer, in words. */
export type Standing = "serving" | "draining" | "in maintenance" | "waiting to join" | "held in maintenance" | "held draining" | "down" | "absent";

/**
 * Pure: how a server stands in the balancer: "serving"; "draining" or "in maintenance" where a
 * rollout of this stack took it out (a rollout cut short: the next `up` puts it back);
 * "waiting to join" where this stack never put it in (a new replica: it is rolled, proven, then
 * put in); "held in maintenance" or "held draining" where an operator took it out by hand
 * after it joined (fleet.loadBalancer.operatorStates); "down" (its check fails); "absent".
 * Admin bit 4 alone is the configuration's `disabled`, lifted by a `state ready`.
 */
export function standing(s: ServerState | undefined): Standing {
  if (!s) return "absent";
  const maint = (s.admin & (1 | 2 | 32 | 64)) !== 0;
  const drain = (s.admin & (8 | 16)) !== 0;
  if (maint || drain) {
    if (s.left) return maint ? "in maintenance" : "draining";
    if (!s.joined) return "waiting to join";
    return maint ? "held in maintenance" : "held draining";
  }
  return (s.op === 2 || s.op === 1) && s.status.startsWith("UP") ? "serving" : "down";
}

/**
 * Pure: whether `up` takes a replica that stands so out and puts it back, whatever else changed:
 * a rollout cut short, a replica never put in (or absent from a HAProxy that answers: the
 * configuration adds it `disabled`), a hold the stack clears. Where this stack's HAProxy does
 * not answer (`servers` null), every replica where it has no saved states (never configured,
 * or a balancer host rebuilt: every server would come up `disabled`), none where it has (they
 * come back as saved).
 */
export function mustRejoin(v: Pick<BalancerView, "servers" | "states">, st: string, operatorStates: "keep" | "clear"): boolean {
  if (v.servers === null) return !v.states;
  return st === "draining" || st === "in maintenance" || st === "waiting to join" || st === "absent" || (operatorStates === "clear" && st.startsWith("held "));
}
