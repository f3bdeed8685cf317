import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { gridCommand, gridStacks, stackConfig, stackFileText, stackName } from "../../../components/sweep/grid";
import { REPO_ROOT } from "../../../lib/pulumi-env";

test("a grid names stacks in the users' convention and skips invalid combinations with the reason", () => {
  const { stacks, skipped } = gridStacks({ budgets: [4, 8], topks: [4, 6], windows: [2048, "none"], compactCache: "auto" });
  assert.deepEqual(stacks.map((s) => s.name), ["b4t4-w2048", "b4t4-wnone", "b8t4-w2048", "b8t4-wnone", "b8t6-w2048", "b8t6-wnone"]);
  assert.deepEqual(skipped, [
    { name: "b4t6-w2048", reason: "topk 6 > budget 4" },
    { name: "b4t6-wnone", reason: "topk 6 > budget 4" },
  ]);
});

test("generated files say the same as the committed sweep stacks", () => {
  const { stacks } = gridStacks({ budgets: [8, 16, 4], topks: [4], windows: [2048, "none"], compactCache: "auto" });
  for (const name of ["b8t4-w2048", "b8t4-wnone", "b16t4-w2048", "b4t4-w2048"]) {
    const committed = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "stacks", `Pulumi.${name}.yaml`), "utf8"));
    const generated = YAML.parse(stacks.find((s) => s.name === name)!.yaml);
    assert.deepEqual(generated, committed, name);
  }
});

test("compact cache: auto follows the window, off never, and a window below the draft block is skipped", () => {
  const off = gridStacks({ budgets: [8], topks: [4], windows: [2048], compactCache: "off" });
  assert.equal(YAML.parse(off.stacks[0].yaml).config["dflash-sglang:speculative"].compactCache, false);
  const small = gridStacks({ budgets: [8], topks: [4], windows: [8], compactCache: "auto" });
  assert.deepEqual(small.skipped, [{ name: "b8t4-w8", reason: "window 8 < draft tokens 16" }]);
});

// Issue 63: a sweep's answer is deployed from the stack file `npm run grid` writes for it; the
// line the sweep prints (gridCommand) writes exactly the file of stackFileText, the one helper.
test("a configuration's stack file, and the npm run grid line that writes exactly that file", () => {
  const cases = [
    { budget: 16, topk: 4, window: 2048, compactCache: true },
    { budget: 8, topk: 4, window: 2048, compactCache: false },
    { budget: 8, topk: 2, window: "none" as const, compactCache: false },
  ];
  for (const c of cases) {
    const line = gridCommand(c)!;
    // The line as npm run grid reads it: --budgets, --topks, --windows, --compact-cache.
    const words = line.replace(/^npm run grid -- /, "").split(" ");
    const opt = (name: string) => (words.includes(`--${name}`) ? words[words.indexOf(`--${name}`) + 1] : undefined);
    const written = gridStacks({ budgets: [Number(opt("budgets"))], topks: [Number(opt("topks"))], windows: [opt("windows") === "none" ? "none" : Number(opt("windows"))], compactCache: (opt("compact-cache") ?? "auto") as "auto" | "on" | "off" });
    assert.deepEqual(written.stacks, [{ name: stackName(c.budget, c.topk, c.window), yaml: stackFileText(c) }], line);
    assert.deepEqual(YAML.parse(stackFileText(c)).config, stackConfig(c));
  }
  assert.equal(gridCommand(cases[0]), "npm run grid -- --budgets 16 --topks 4 --windows 2048");
  assert.equal(gridCommand(cases[1]), "npm run grid -- --budgets 8 --topks 4 --windows 2048 --compact-cache off");
  assert.equal(gridCommand({ ...cases[0], draftTokens: 8 }), undefined, "npm run grid has no --draft-tokens");
  assert.deepEqual(YAML.parse(stackFileText(cases[0])), YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "stacks", "Pulumi.b16t4-w2048.yaml"), "utf8")));
});
