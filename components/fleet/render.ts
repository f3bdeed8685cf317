// Pure: what the fleet's balancer host receives. HAProxy's configuration (one frontend, one
// backend of the replicas, health checks that ask each replica to generate) and the host
// scripts that put it in place and drive HAProxy's runtime API (host/balancer*.sh).
import { Deployment, Fleet, minHealthyOf } from "../sglang-service/schema";
import { renderHostScript } from "../sglang-service/hostScript";

/** Where HAProxy keeps what the fleet's steps need on the balancer host (Debian's layout). */
export const BALANCER_PATHS = {
  config: "/etc/haproxy/haproxy.cfg",
  socket: "/run/haproxy/admin.sock",
  stateFile: "/var/lib/haproxy/dflash-server-state",
  /** Held by a leave while it counts the others and drains (host/balancer-step.sh). */
  lock: "/run/dflash-sglang-balancer.lock",
} as const;

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
  return { ...d, host, service: { ...d.service, listenAddress }, fleet: undefined };
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

/**
 * Pure: HAProxy's configuration for the fleet. Deterministic (a preview shows only real
 * changes). Requests are balanced per request to the replica with the fewest (`leastconn`:
 * generations differ in length by orders of magnitude); a replica receives requests only while
 * its health check, a one-token generation (`/health_generate`: SGLang refuses connections
 * while it loads, and answers 503 until warmed up and while it drains), passes. A connection
 * refused (a replica that just went down) is retried, the last retry on another replica
 * (`retries 3`, `option redispatch`: HAProxy retries only where nothing was sent).
 * Responses, streamed ones included, pass through as they come (HAProxy buffers no body, and
 * `http-no-delay` keeps it from holding small writes back to merge them).
 */
export function renderHaproxyConfig(d: Deployment, stack: string): string {
  const f = d.fleet;
  if (!f) throw new Error("renderHaproxyConfig: the deployment has no fleet");
  const front = frontendOf(f);
  const inter = `${Math.round(f.loadBalancer.checkSeconds * 1000)}ms`;
  const lines = [
    `# HAProxy for the SGLang fleet of stack ${stack} (${d.service.unitName} on ${f.replicas.length + 1} replicas).`,
    "# Rendered by dflash-sglang (components/fleet/render.ts); `pulumi up` replaces it: do not edit.",
    "global",
    "    log /dev/log local0",
    "    chroot /var/lib/haproxy",
    `    stats socket ${BALANCER_PATHS.socket} mode 660 level admin`,
    "    stats timeout 30s",
    "    user haproxy",
    "    group haproxy",
    // The servers' runtime states (drained, ready) survive a reload and a restart: host/balancer-api.sh saves them.
    `    server-state-file ${BALANCER_PATHS.stateFile}`,
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
    `    default-server check inter ${inter} fall 2 rise 2`,
    ...replicasOf(d).map((r) => `    server ${r.server} ${hostPort(r.address, r.port)}`),
    "",
  ];
  return lines.join("\n");
}

/** Pure: the values every balancer script starts with. */
function common(d: Deployment) {
  const f = d.fleet!;
  return { balancer: `${f.loadBalancer.host.address}:${f.loadBalancer.host.port}`, socket: BALANCER_PATHS.socket, state_file: BALANCER_PATHS.stateFile, command_seconds: Math.ceil(d.timeouts.commandSeconds) };
}

/** Pure: the script that puts the configuration in place and (re)loads HAProxy (host/balancer.sh). */
export function renderBalancerScript(d: Deployment, stack: string): string {
  return renderHostScript({
    about: [`dflash-sglang: HAProxy for the fleet of stack ${stack}.`],
    set: "-uo pipefail",
    values: { ...common(d), config_path: BALANCER_PATHS.config, config_text: { text: renderHaproxyConfig(d, stack) } },
    files: ["balancer-api.sh", "balancer.sh"],
    component: { folder: "fleet", renderer: "render.ts" },
  });
}

export type BalancerAction = "show" | "leave" | "rejoin";

/** Pure: one rollout step on the balancer (host/balancer-step.sh); `server` is ignored by `show`. */
export function renderBalancerStep(d: Deployment, action: BalancerAction, server = "", waitSeconds = 0): string {
  const f = d.fleet!;
  return renderHostScript({
    about: [`dflash-sglang: the fleet's balancer, ${action}${server ? ` ${server}` : ""}.`],
    set: "-uo pipefail",
    values: { ...common(d), action, backend: BACKEND, server, min_healthy: minHealthyOf(f), wait_seconds: Math.ceil(waitSeconds), poll: (d.timeouts.pollMs / 1000).toFixed(3), lock_file: BALANCER_PATHS.lock },
    files: ["balancer-api.sh", "balancer-servers.sh", "balancer-step.sh"],
    component: { folder: "fleet", renderer: "render.ts" },
  });
}

/** A server's line from `show` (host/balancer-api.sh servers). */
export interface ServerState {
  server: string;
  address: string;
  op: number;
  admin: number;
  sessions: number;
  queued: number;
  status: string;
  check: string;
}

/** Pure: the servers a `show` printed; null where HAProxy did not answer (not configured yet). */
export function parseServers(stdout: string): ServerState[] | null {
  if (/^@@absent$/m.test(stdout)) return null;
  return stdout
    .split("\n")
    .map((l) => /^(\S+) (\S+) op=(\d+) admin=(\d+) scur=(\d+) qcur=(\d+) status=(\S*) check=(\S*)$/.exec(l.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ server: m[1], address: m[2], op: Number(m[3]), admin: Number(m[4]), sessions: Number(m[5]), queued: Number(m[6]), status: m[7].replaceAll("_", " "), check: m[8] }));
}

/** Pure: how a server stands in the balancer, in words: "serving", "draining", "in maintenance", "down", "absent". */
export function standing(s: ServerState | undefined): "serving" | "draining" | "in maintenance" | "down" | "absent" {
  if (!s) return "absent";
  if (s.admin & (1 | 2 | 4 | 32 | 64)) return "in maintenance";
  if (s.admin & (8 | 16)) return "draining";
  return s.op === 2 && s.status.startsWith("UP") ? "serving" : "down";
}
