// What the fleet's end-to-end tests (test/components/fleet/*.test.ts) share: the budgets the
// replicas' servers run, a client ledger around a step, its clean verdict, and a wait on a condition.
import * as assert from "node:assert/strict";
import type { HostInfo } from "../../simhost/hosts";
import { LedgerReport, startLedger } from "../../components/fleet/ledger";

/** The DDTree budget each host's server runs, from its own /server_info. */
export function budgetsOf(hosts: HostInfo[]): Promise<number[]> {
  return Promise.all(
    hosts.map(async (h) => {
      const info = (await (await fetch(`http://${h.address}:${h.sglangPort}/server_info`)).json()) as Record<string, unknown>;
      return info.speculative_ddtree_budget as number;
    }),
  );
}

/** Runs `fn` with clients sending through the balancer at `baseUrl` (2 requests/s, every third streaming); their ledger. */
export async function underLoadAt(baseUrl: string, model: string, fn: () => Promise<void>): Promise<LedgerReport> {
  const ledger = startLedger({ baseUrl, model, perSecond: 2, streamEvery: 3, maxTokens: 256, timeoutMs: 120_000 });
  let report: LedgerReport | undefined;
  try {
    await fn();
  } finally {
    // Stopped whatever `fn` did: a failed step still ends the clients.
    report = await ledger.stop();
  }
  return report;
}

/** The ledger holds no failed, cut or garbled answer. */
export function assertClean(r: LedgerReport): void {
  assert.deepEqual({ failed: r.failed, cut: r.cut, problems: r.problems }, { failed: 0, cut: 0, problems: [] }, `the clients saw ${r.failed} failed and ${r.cut} cut of ${r.sent}`);
}

/** Waits until `check` holds, at most `seconds`; fails naming `what`. */
export async function until(check: () => Promise<boolean>, what: string, seconds = 30): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `not within ${seconds} s: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
