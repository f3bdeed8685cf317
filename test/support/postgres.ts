// A throwaway PostgreSQL server for the integration tests: its own data folder in a temp
// folder, listening only on 127.0.0.1 at a port found free at run time (and on a unix socket
// inside that folder), run by an unprivileged user when the test runs as root (initdb
// refuses root), stopped by its postmaster's PID, its folder removed.
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { postgresProgram } from "../../lib/postgres";

/** Never to be used here: 2024 belongs to the machine, 5432 to a system cluster. */
const RESERVED_PORTS = new Set([2024, 5432]);
const SUPERUSER = "postgres";

export interface ThrowawayPostgres {
  port: number;
  /** The postmaster's PID (what `stop` ends). */
  pid: number;
  /** Runs SQL as the superuser over the unix socket; returns psql's unaligned output. */
  sql(statement: string, database?: string): string;
  /** A `postgres://` URL for `user` over TCP (no TLS: loopback only). */
  url(user: string, password: string, database: string): string;
  stop(): void;
}

/** The programs of one PostgreSQL version, or a message saying how to get them. */
function programs(): { initdb: string; pgCtl: string; psql: string } {
  const initdb = postgresProgram("initdb");
  if (!initdb) {
    throw new Error("PostgreSQL's initdb is not installed (looked on PATH and in /usr/lib/postgresql/*/bin): `npm test` installs it (scripts/setup.sh --postgres), or apt-get install postgresql");
  }
  // pg_ctl and psql of the same version as initdb (Debian: one bin folder per version).
  const bin = path.dirname(fs.realpathSync(initdb));
  const sibling = (name: string) => (fs.existsSync(path.join(bin, name)) ? path.join(bin, name) : postgresProgram(name));
  const pgCtl = sibling("pg_ctl");
  const psql = sibling("psql");
  if (!pgCtl || !psql) throw new Error(`PostgreSQL's ${!pgCtl ? "pg_ctl" : "psql"} is not installed beside ${initdb}: apt-get install postgresql`);
  return { initdb, pgCtl, psql };
}

/** Who runs the server: this process, or an unprivileged user when this process is root. */
function serverUser(): { uid: number; gid: number; name: string } {
  if (process.getuid?.() !== 0) return { uid: process.getuid!(), gid: process.getgid!(), name: os.userInfo().username };
  for (const name of ["postgres", "nobody"]) {
    try {
      const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());
      const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8" }).trim());
      return { uid, gid, name };
    } catch {
      // no such user: the next one
    }
  }
  throw new Error("initdb refuses to run as root, and neither the user postgres nor nobody exists to run it");
}

async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = net.createServer();
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as net.AddressInfo;
        server.close(() => resolve(port));
      });
    });
    if (!RESERVED_PORTS.has(port)) return port;
  }
}

/** `name` (letters, digits, `-`) goes into the temp folder's name. */
export async function startPostgres(name: string): Promise<ThrowawayPostgres> {
  if (!/^[A-Za-z0-9-]+$/.test(name)) throw new Error(`startPostgres: name "${name}" may hold only letters, digits and -`);
  const { initdb, pgCtl, psql } = programs();
  const user = serverUser();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `dflash-pg-${name}-`));
  const data = path.join(dir, "data");
  const log = path.join(dir, "server.log");
  const asServer = (file: string, args: string[]) => {
    const r = spawnSync(file, args, { uid: user.uid, gid: user.gid, cwd: dir, encoding: "utf8", timeout: 60_000, env: { ...process.env, LC_ALL: "C" } });
    return { ok: r.status === 0, out: `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? r.error.message : ""}`.trim() };
  };
  let pid = 0;
  const stop = () => {
    if (pid > 0) {
      // pg_ctl ends the postmaster named in data/postmaster.pid (ours); SIGTERM it if that fails.
      if (!asServer(pgCtl, ["stop", "-D", data, "-m", "fast", "-w", "-t", "30"]).ok) {
        try {
          process.kill(pid, "SIGTERM");
        } catch {
          // already gone
        }
      }
      pid = 0;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    fs.chownSync(dir, user.uid, user.gid);
    fs.chmodSync(dir, 0o700);
    const init = asServer(initdb, ["-D", data, "-U", SUPERUSER, "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"]);
    if (!init.ok) throw new Error(`initdb (as ${user.name}) failed: ${init.out.slice(-2000)}`);
    let port = 0;
    for (let attempt = 1; pid === 0; attempt++) {
      port = await freePort();
      // Only loopback, only this port, the socket in our own folder; durability is not needed.
      fs.appendFileSync(data + "/postgresql.conf", `\nlisten_addresses = '127.0.0.1'\nport = ${port}\nunix_socket_directories = '${dir}'\nfsync = off\nmax_connections = 40\n`);
      const start = asServer(pgCtl, ["start", "-D", data, "-l", log, "-w", "-t", "30"]);
      // A postmaster that came up, even if pg_ctl gave up waiting for it, is ours to stop.
      const pidFile = path.join(data, "postmaster.pid");
      if (fs.existsSync(pidFile)) pid = Number(fs.readFileSync(pidFile, "utf8").split("\n")[0]);
      if (!start.ok && (pid > 0 || attempt >= 3)) {
        throw new Error(`PostgreSQL did not start on 127.0.0.1:${port} (try ${attempt}): ${start.out}\n${fs.existsSync(log) ? fs.readFileSync(log, "utf8").slice(-2000) : ""}`);
      }
    }
    const sql = (statement: string, database = "postgres"): string => {
      const r = spawnSync(psql, ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", dir, "-p", String(port), "-U", SUPERUSER, "-d", database, "-c", statement], { encoding: "utf8", timeout: 30_000 });
      if (r.status !== 0) throw new Error(`psql: ${statement}: ${(r.stderr || r.error?.message || "").trim()}`);
      return r.stdout.trim();
    };
    return {
      port,
      pid,
      sql,
      url: (u, password, database) => `postgres://${encodeURIComponent(u)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}?sslmode=disable`,
      stop,
    };
  } catch (e) {
    stop();
    throw e;
  }
}
