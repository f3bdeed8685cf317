// The benchmarks use the same statistics as the benchmark component.
import type { EngineEvent } from "@pulumi/pulumi/automation";
export { summarize, Summary } from "../components/benchmark/stats";

/** Seconds `fn` took, wall clock. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = Date.now();
  await fn();
  return (Date.now() - t) / 1000;
}

/** Progress lines worth a row: the steps' own account of the restart ("<unit> (stack <name>): ..."), not the SDK's debug lines. */
const STEP_LINE = /\(stack [^)]+\): /;

/**
 * An engine-event handler that writes each resource's start and end and the steps' progress
 * lines, each with its seconds since `restart()` was last called (at creation first): where an
 * `up`'s seconds go (bench/up-timeline.ts, npm run fleet -- --timeline).
 */
export function engineTimeline(write: (line: string) => void): { onEvent: (e: EngineEvent) => void; row: (what: string) => void; restart: () => void } {
  let t0 = Date.now();
  const row = (what: string) => write(`${((Date.now() - t0) / 1000).toFixed(2).padStart(7)}  ${what}\n`);
  const name = (urn: string) => urn.split("::").pop();
  const onEvent = (e: EngineEvent) => {
    if (e.resourcePreEvent) row(`start ${e.resourcePreEvent.metadata.op} ${name(e.resourcePreEvent.metadata.urn)}`);
    if (e.resOutputsEvent) row(`end   ${e.resOutputsEvent.metadata.op} ${name(e.resOutputsEvent.metadata.urn)}`);
    if (e.diagnosticEvent && STEP_LINE.test(e.diagnosticEvent.message) && !/^Register/.test(e.diagnosticEvent.message)) row(`      ${e.diagnosticEvent.message.trim().slice(0, 160)}`);
  };
  return { onEvent, row, restart: () => (t0 = Date.now()) };
}
