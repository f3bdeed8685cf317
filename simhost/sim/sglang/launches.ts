// The ordinal of a start of the simulated server on its host: 0 for the first start, 1 for
// the next, whatever the configuration. The surface's launch-to-launch noise (./surface.ts,
// launchOffset) is drawn from it, so two starts of one configuration differ while a fresh
// host (or a test's fresh sandbox) replays the same sequence: no wall clock, no PID. Not a
// fact of SGLang: the simulator's bookkeeping, kept beside the GPU state on the host.
import * as fs from "node:fs";
import * as path from "node:path";

export const LAUNCHES_DIR = process.env.DFLASH_SIM_LAUNCHES ?? "/var/lib/dflash-sim/launches";

/**
 * Takes the next ordinal: one file per start, created exclusively, so two servers starting
 * at once on a host never share one. The file holds the PID that took it (for a reader).
 */
export function takeLaunchOrdinal(dir: string = LAUNCHES_DIR, pid: number = process.pid): number {
  fs.mkdirSync(dir, { recursive: true });
  for (let n = fs.readdirSync(dir).length; ; n++) {
    try {
      fs.writeFileSync(path.join(dir, String(n)), `${pid}\n`, { flag: "wx" });
      return n;
    } catch (e) {
      // Taken by a start that raced this one: the next.
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
  }
}
