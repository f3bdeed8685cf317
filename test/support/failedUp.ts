// One way for a test to run an `up` that must fail: the error message is what it checks.
import * as assert from "node:assert/strict";
import type { Stack, UpOptions } from "@pulumi/pulumi/automation";

/** Runs `up`, which must fail, and returns its error message; the test fails, saying `why`, if it succeeds. */
export async function failedUp(stack: Stack, why: string, opts?: UpOptions): Promise<string> {
  return stack.up(opts).then(
    () => assert.fail(`up succeeded, but ${why}`),
    (e: Error) => e.message,
  );
}
