// Code extraction from recorded answers of thinking models, and the sandboxed grader.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { CODING_TASKS, extractCode, gradeAnswer, runPythonTests } from "../../../components/benchmark/coding";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

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

// Issue 12, scenario 10: the model's code is untrusted. It runs without network, sees
// nothing of the file system but /usr and its scratch folder (read-only /usr), and within
// resource limits. Each check is written as the answer's own code: "pass" would mean it got out.
test("sandbox: no network, even to a server on loopback", async () => {
  let connections = 0;
  const server = net.createServer((s) => (connections++, s.destroy()));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as net.AddressInfo;
  try {
    const r = runPythonTests(`import socket\ndef reach():\n    socket.create_connection(("127.0.0.1", ${port}), timeout=3).close()\n`, "reach()");
    assert.equal(r.outcome, "fail");
    assert.match(r.detail, /ConnectionRefusedError|OSError|Network is unreachable/);
    assert.equal(connections, 0);
  } finally {
    server.close();
  }
});

test("sandbox: the operator's files are invisible and nothing outside the scratch folder is writable", () => {
  const outside = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-outside-"));
  try {
    fs.writeFileSync(path.join(outside, "secret"), "sk-not-for-models");
    const read = runPythonTests(`def leak():\n    return open(${JSON.stringify(path.join(outside, "secret"))}).read()\n`, "leak()");
    assert.equal(read.outcome, "fail");
    assert.match(read.detail, /FileNotFoundError/);
    for (const target of [path.join(outside, "written"), "/usr/pwned", path.join(os.homedir(), "pwned")]) {
      const write = runPythonTests(`def plant():\n    open(${JSON.stringify(target)}, "w").write("x")\n`, "plant()");
      assert.equal(write.outcome, "fail", target);
    }
    assert.deepEqual(fs.readdirSync(outside), ["secret"]);
    assert.equal(fs.existsSync(path.join(os.homedir(), "pwned")), false);
    assert.equal(runPythonTests(`def scratch():\n    open("mine.txt", "w").write("x")\n`, "scratch()").outcome, "pass", "its own folder is writable");
  } finally {
    fs.rmSync(outside, { recursive: true, force: true });
  }
});

test("sandbox: memory is limited (an address-space limit of 2 GiB)", () => {
  const r = runPythonTests(`def hog():\n    return bytearray(3 * 1024 ** 3)\n`, "hog()");
  assert.equal(r.outcome, "fail");
  assert.match(r.detail, /MemoryError/);
});
