// The tool's one clock for durations and deadlines: monotonic (performance.now(), from
// node:perf_hooks), which no NTP correction, manual change or resumed VM steps (issue 60): on
// Date.now() such a step of +2 h ended every wait at once, and one of -2 h held it for hours.
// Date.now() stays for what a person reads or a record stores (a wall-clock time).
import { performance } from "node:perf_hooks";

/** Milliseconds on a monotonic clock from an arbitrary origin: only differences mean anything. */
export function monotonicMs(): number {
  return performance.now();
}
