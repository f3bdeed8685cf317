// Benchmark results that outlive their stack: every finished benchmark is also kept as one
// JSON file under bench/history/<stack>/ of the project folder (git-ignored, like bench/out:
// a team that wants its numbers in review adds them with `git add -f`). A `destroy` empties
// the stack's outputs, not this folder, so `npm run report` still shows what a destroyed
// stack measured, and every run of a stack measured several times. A record names the
// backend whose stack it measured (a test's throwaway backend is not the project's), the
// configuration and the unit (its hash) it measured, the host, and when.
import * as fs from "node:fs";
import * as path from "node:path";
import type { StoredResult } from "./compare";

/** The folder of the kept results, relative to the project folder (the provider's working folder). */
export const HISTORY_DIR = path.join("bench", "history");

export interface HistoryRecord {
  /** 1: this shape. */
  format: 1;
  stack: string;
  /** The backend the stack lives in (PULUMI_BACKEND_URL without credentials), or "" when the provider was not told. */
  backend: string;
  takenAt: string;
  /** The unit that served while it was measured (sha256 of its text): the configuration's fingerprint. */
  unitHash: string;
  host: string;
  configuration: Record<string, unknown>;
  /** As the benchmark that took it stored it: this format or an older one (compare.ts reads both). */
  result: StoredResult;
}

/** Pure: a backend URL as records name it: without a user name, a password or the query (which may hold one, `?password=`). */
export function backendName(url: string | undefined): string {
  if (!url) return "";
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, "$1").replace(/[?#].*$/, "");
}

/** Pure: a record's file, relative to the project folder: one per stack and run, named so that they sort by time. */
export function historyFile(stack: string, takenAt: string, unitHash: string): string {
  return path.join(HISTORY_DIR, stack.replace(/[^A-Za-z0-9._-]/g, "_"), `${takenAt.replace(/[:]/g, "-")}-${unitHash.slice(0, 12)}.json`);
}

/** Keeps one run's record under `root` (the project folder). */
export function keepResult(root: string, r: HistoryRecord): string {
  const file = path.join(root, historyFile(r.stack, r.takenAt, r.unitHash));
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(r, null, 2)}\n`);
  fs.renameSync(`${file}.tmp`, file);
  return file;
}

/**
 * The kept records of one backend under `root`, oldest first per stack. Records of an unknown
 * backend ("") count for every backend; a file that does not parse is skipped and named in
 * `unreadable`, never fatal to a report.
 */
export function readHistory(root: string, backend: string): { records: HistoryRecord[]; unreadable: string[] } {
  const dir = path.join(root, HISTORY_DIR);
  const records: HistoryRecord[] = [];
  const unreadable: string[] = [];
  if (!fs.existsSync(dir)) return { records, unreadable };
  for (const stack of fs.readdirSync(dir).sort()) {
    const sub = path.join(dir, stack);
    if (!fs.statSync(sub).isDirectory()) continue;
    for (const f of fs.readdirSync(sub).filter((n) => n.endsWith(".json")).sort()) {
      try {
        const r = JSON.parse(fs.readFileSync(path.join(sub, f), "utf8")) as HistoryRecord;
        if (r.format !== 1 || typeof r.stack !== "string" || typeof r.takenAt !== "string" || !r.result) throw new Error("not a record");
        if (r.backend === "" || backendName(r.backend) === backendName(backend)) records.push(r);
      } catch {
        unreadable.push(path.join(HISTORY_DIR, stack, f));
      }
    }
  }
  records.sort((a, b) => a.stack.localeCompare(b.stack) || a.takenAt.localeCompare(b.takenAt));
  return { records, unreadable };
}

/** Removes the records of one backend under `root` (a throwaway workspace's, when it is cleaned up). */
export function forgetBackend(root: string, backend: string): void {
  const dir = path.join(root, HISTORY_DIR);
  if (!fs.existsSync(dir)) return;
  for (const stack of fs.readdirSync(dir)) {
    const sub = path.join(dir, stack);
    if (!fs.statSync(sub).isDirectory()) continue;
    for (const f of fs.readdirSync(sub).filter((n) => n.endsWith(".json"))) {
      try {
        if (backendName((JSON.parse(fs.readFileSync(path.join(sub, f), "utf8")) as HistoryRecord).backend) === backendName(backend)) fs.rmSync(path.join(sub, f));
      } catch {
        // Not a record of ours: left alone.
      }
    }
    if (fs.readdirSync(sub).length === 0) fs.rmdirSync(sub);
  }
}
