// The header of values a host script starts with: every value reads back in bash exactly as
// given (quotes, spaces, lists, texts of several lines, a text holding the end marker of a
// here-document), names are shell names, and a script reaches bash whole from any shell.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { bashCommand, hostFile, hostValues, renderHostScript } from "../../../components/sglang-service/hostScript";

const bash = (script: string) => spawnSync("bash", ["-c", script], { encoding: "utf8" });

test("every kind of value reads back in bash exactly as given", () => {
  const texts = ["[Unit]\nDescription=it's \"quoted\" $HOME `x`\n", "no newline at the end", "a\nDFLASH_EOF\nDFLASH_EOF_2\nb\n"];
  const header = hostValues({
    word: "it's a $word with spaces",
    number: 2.5,
    yes: true,
    no: false,
    list: ["a b", "", "c'd", "$(echo no)"],
    empty: [],
    text: { text: texts[0] },
    marked: { text: texts[2] },
    many: { texts },
  });
  const r = bash(`set -u\n${header}\nprintf '%s|' "$word" "$number" "$yes" "$no" "\${#list[@]}" "\${list[@]}" "\${#empty[@]}"; printf '%s' "$text" "$marked" "\${many[1]}" "\${#many[@]}"`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, `it's a $word with spaces|2.5|yes|no|4|a b||c'd|$(echo no)|0|${texts[0]}${texts[2]}no newline at the end\n3`);
});

test("a name that is not a shell name, a value with a control character, a NUL in a text or a comment over two lines is refused", () => {
  assert.throws(() => hostValues({ "bad-name": "x" }), /not a shell variable name: "bad-name"/);
  assert.throws(() => hostValues({ x: "a\nb" }), /newline or control character/);
  assert.throws(() => hostValues({ x: ["ok", "a\tb"] }), /newline or control character/);
  assert.throws(() => hostValues({ x: { text: "a\0b" } }), /NUL byte/);
  assert.throws(() => hostValues({ x: undefined as unknown as string }), /x: no value to render/);
  assert.throws(() => renderHostScript({ about: ["one\ntwo"], set: "-u", values: {}, files: [] }), /comment line with a newline/);
});

test("a host script is its values, then its files verbatim, and runs from any shell through bashCommand", () => {
  const script = renderHostScript({ about: ["a test"], set: "-u", values: { run: "/tmp/x y", stack: "s" }, files: ["node-state.sh"] });
  assert.ok(script.startsWith("#!/bin/bash\n# a test\n"), script);
  assert.ok(script.includes(`# --- components/sglang-service/host/node-state.sh ---\n${hostFile("node-state.sh").trimEnd()}\n`));
  const r = spawnSync("sh", ["-c", bashCommand('printf "%s|" "$@"; printf "%s" "$run"', ["a b", "it's"])], { encoding: "utf8", env: { ...process.env, run: "x" } });
  assert.equal(r.stdout, "a b|it's|x", r.stderr);
});
