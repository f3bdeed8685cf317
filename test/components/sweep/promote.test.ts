// Issue 63: nothing said how to turn a sweep's answer into a stack in stacks/ or a fleet. The
// sweep's output now ends with the commands (components/sweep/promote.ts): the stack file (the
// full sweep's is there already; an adaptive sweep's answer gets the `npm run grid` line that
// writes it, grid.ts), `npx pulumi stack init` and `up`, and the keys a fleet's stack file takes.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as YAML from "yaml";
import { promotionText } from "../../../components/sweep/promote";
import { gridCommand, stackConfig } from "../../../components/sweep/grid";

const B16 = { budget: 16, topk: 4, window: 2048, compactCache: true };
const SPEC = stackConfig(B16);

/** The commands of the text's sh block, one a line, without their comments. */
const commands = (text: string) => text.split("```sh\n")[1].split("```")[0].trim().split("\n").map((l) => l.replace(/(^|\s+)#.*$/, ""));
const fleetYaml = (text: string) => YAML.parse(text.split("```yaml\n")[1].split("```")[0]);

test("the full sweep's best: its stack file is the one swept, then stack init and up; a fleet takes its keys", () => {
  const text = promotionText({ stack: "b16t4-w2048", config: SPEC, existing: SPEC });
  assert.match(text, /^## Deploy it\n\nTo serve b16t4-w2048, the best, on the host of Pulumi\.yaml's `dflash-sglang:host`/);
  assert.deepEqual(commands(text), ["", "npx pulumi stack init b16t4-w2048", "npx pulumi up --stack b16t4-w2048"]);
  assert.match(text, /# stacks\/Pulumi\.b16t4-w2048\.yaml holds its settings already \(the sweep measured that file\)/);
  assert.match(text, /For a fleet behind HAProxy .* set these keys of stacks\/Pulumi\.b16t4-w2048\.yaml in your fleet stack's file/);
  assert.deepEqual(fleetYaml(text), { config: SPEC });
});

test("an adaptive sweep's best: the npm run grid line that writes its stack file, or --force where a file of that name says otherwise", () => {
  const write = gridCommand(B16);
  const fresh = promotionText({ stack: "b16t4-w2048", config: SPEC, write });
  assert.deepEqual(commands(fresh), ["npm run grid -- --budgets 16 --topks 4 --windows 2048", "npx pulumi stack init b16t4-w2048", "npx pulumi up --stack b16t4-w2048"]);
  assert.match(fresh, /--windows 2048   # writes stacks\/Pulumi\.b16t4-w2048\.yaml\n/);
  // The same settings in stacks/ already (key order aside): nothing to write.
  const same = promotionText({ stack: "b16t4-w2048", config: SPEC, write, existing: { "dflash-sglang:speculative": { compactCache: true, draftWindowSize: 2048, topk: 4, budget: 16, algorithm: "DDTREE" } } });
  assert.deepEqual(commands(same)[0], "");
  const other = promotionText({ stack: "b16t4-w2048", config: SPEC, write, existing: stackConfig({ ...B16, compactCache: false }) });
  assert.equal(commands(other)[0], "npm run grid -- --budgets 16 --topks 4 --windows 2048 --force");
  assert.match(other, /# overwrites stacks\/Pulumi\.b16t4-w2048\.yaml, whose settings differ/);
});

test("a tie deploys its first, saying so in the verdict's words; no answer, nothing to deploy", () => {
  const tie = promotionText({ stack: "b16t4-w2048", config: SPEC, existing: SPEC, tie: ["b16t4-w2048", "b8t4-w2048"] });
  assert.match(tie, /To serve b16t4-w2048, the first of the tie b16t4-w2048, b8t4-w2048 \(none is named best; it has the highest estimate\)/);
  assert.equal(commands(tie)[2], "npx pulumi up --stack b16t4-w2048");
  assert.equal(promotionText(undefined), "## Deploy it\n\nNothing to deploy: no best configuration.\n");
});
