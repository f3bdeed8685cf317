// Code extraction from recorded answers of thinking models, and the sandboxed grader.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { CODING_TASKS, extractCode, gradeAnswer, runPythonTests } from "../../../components/benchmark/coding";

const SOLUTION = "def add(a, b):\n    return a + b\n";

test("skips a reasoning block, even one that contains code of its own", () => {
  const answer = "<think>\nMaybe:\n```python\ndef add(a, b):\n    return a - b\n```\nNo, that is wrong.\n</think>\n\nFinal:\n```python\n" + SOLUTION + "```\n";
  assert.equal(extractCode(answer, "add"), SOLUTION);
});

test("an unclosed reasoning block is skipped up to the first fence", () => {
  assert.equal(extractCode("<think>\nlet me think about add\n```python\n" + SOLUTION + "```", "add"), SOLUTION);
});

test("of several fences, the last one defining the entry point wins", () => {
  const answer = "Usage:\n```python\nprint(add(1, 2))\n```\nCode:\n```python\n" + SOLUTION + "```\nAlternative:\n```python\nimport math\n```\n";
  assert.equal(extractCode(answer, "add"), SOLUTION);
});

test("language tags and fence styles: py, python3, none, tildes; other languages are ignored", () => {
  for (const open of ["```py", "```python3", "```", "~~~python", "```Python"]) {
    const close = open.startsWith("~") ? "~~~" : "```";
    assert.equal(extractCode(`Here:\n${open}\n${SOLUTION}${close}\n`, "add"), SOLUTION, open);
  }
  assert.equal(extractCode("```bash\npip install add\n```\n```python\n" + SOLUTION + "```", "add"), SOLUTION);
});

test("no fence: code from the first def/import to the end", () => {
  assert.equal(extractCode("Sure. Here it is:\n\n" + SOLUTION, "add"), SOLUTION);
});

test("nothing that looks like code is an extraction failure, not a test failure", () => {
  assert.equal(extractCode("I cannot help with that.", "add"), undefined);
  const graded = gradeAnswer(CODING_TASKS[0], "<think>hmm</think> Sorry, no.");
  assert.deepEqual(graded, { outcome: "extraction-failed", detail: "no code found in the answer" });
});

test("the grader passes right code, fails wrong code, and stops runaway code", () => {
  assert.equal(runPythonTests(SOLUTION, "assert add(2, 3) == 5").outcome, "pass");
  const wrong = runPythonTests("def add(a, b):\n    return a - b\n", "assert add(2, 3) == 5");
  assert.equal(wrong.outcome, "fail");
  assert.match(wrong.detail, /AssertionError/);
  assert.equal(runPythonTests("while True:\n    pass\n", "", 500).outcome, "timeout");
});
