// PostgreSQL as a Pulumi backend (`postgres://...`, Pulumi's DIY PostgreSQL backend): where
// PostgreSQL's programs are, and how psql reaches the database a backend URL names.
import * as fs from "node:fs";
import * as path from "node:path";

/** Where Debian installs each PostgreSQL version's programs: /usr/lib/postgresql/<version>/bin. */
const DEBIAN_ROOT = "/usr/lib/postgresql";

/**
 * The path of one of PostgreSQL's programs (`initdb`, `pg_ctl`, `psql`): from PATH, else from
 * the newest version under /usr/lib/postgresql (Debian puts only psql and a few wrappers on
 * PATH, links to its pg_wrapper, which picks the program by the name it is called by).
 */
export function postgresProgram(name: string): string | null {
  const onPath = (process.env.PATH ?? "").split(":").filter(Boolean).map((dir) => path.join(dir, name));
  const versions = safeList(DEBIAN_ROOT)
    .filter((v) => /^\d+(\.\d+)?$/.test(v))
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => path.join(DEBIAN_ROOT, v, "bin", name));
  for (const candidate of [...onPath, ...versions]) {
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not there, or not executable: the next one
    }
  }
  return null;
}

export interface PsqlTarget {
  /** The connection URI for psql: the backend URL without Pulumi's `table` parameter and without the password. */
  uri: string;
  /** PGPASSWORD, when the URL holds a password (kept off psql's command line, which `ps` shows). */
  env: Record<string, string>;
  /** The table Pulumi keeps its state in (`?table=`, default `pulumi_state`). */
  table: string;
  /**
   * What Pulumi puts before each object's key: the URL's path (the database name) and a
   * slash, as for any bucket URL with a path; `.pulumi/...` follows.
   */
  keyPrefix: string;
}

/**
 * How psql reaches the database of a `postgres://` backend URL (Pulumi knows no other
 * spelling). Throws when the table name is not a plain (optionally schema-qualified) SQL
 * name: it goes into a query as it is.
 */
export function psqlTarget(backendUrl: string): PsqlTarget {
  const url = new URL(backendUrl);
  if (url.protocol !== "postgres:") throw new Error(`${url.protocol}// is not Pulumi's PostgreSQL backend (postgres://)`);
  const table = url.searchParams.get("table") ?? "pulumi_state";
  if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/.test(table)) {
    throw new Error(`the backend URL's table parameter "${table}" is not a plain SQL name (letters, digits, _ and one optional schema dot)`);
  }
  url.searchParams.delete("table");
  const env: Record<string, string> = {};
  if (url.password !== "") env.PGPASSWORD = decodeURIComponent(url.password);
  url.password = "";
  const path = decodeURIComponent(url.pathname).replace(/^\/+/, "");
  return { uri: url.toString(), env, table, keyPrefix: path === "" || path.endsWith("/") ? path : `${path}/` };
}

function safeList(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}
