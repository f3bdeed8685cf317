// A dynamic provider runs as: engine -> sh (pulumi-resource-pulumi-nodejs) -> node (us).
// If the engine is killed (SIGKILL, OOM), nothing tells the provider, which would keep
// proving (or rolling back) a restart nobody watches. We end with the engine: our SSH
// sessions die with us, and the next `up` converges.
import * as fs from "node:fs";

function parentOf(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

let watching = false;

export function exitWithEngine(): void {
  // Only inside the provider process, never in a test or script that imports us.
  if (watching || process.platform !== "linux" || !/dynamic-provider/.test(process.argv[1] ?? "")) return;
  watching = true;
  const wrapper = process.ppid;
  const engine = parentOf(wrapper);
  if (engine === undefined || engine <= 1) return;
  setInterval(() => {
    if (process.ppid !== wrapper || parentOf(wrapper) !== engine) {
      process.stderr.write("dflash-sglang: the Pulumi engine is gone; stopping this provider\n");
      process.exit(1);
    }
  }, 1000).unref();
}
