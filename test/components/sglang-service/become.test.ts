// How a host step reaches root (become.ts): the command the SSH user runs, its stdin, sudo's
// refusals, and the sudoers lines the README shows. The stdin form is run by a real bash here:
// what the group's command leaves unread on stdin (secrets) is never run as a command.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { asSshUser, SUDO_COMMAND, sudoersFor, sudoRefusal } from "../../../components/sglang-service/become";
import { REPO_ROOT } from "../../../lib/pulumi-env";

test("as root (no become), a host command is run as it is", () => {
  assert.deepEqual(asSshUser(undefined, "bash '/var/lib/dflash-sglang/u/stacks/s/transaction.sh' restart abc", "c2VjcmV0\n"), {
    command: "bash '/var/lib/dflash-sglang/u/stacks/s/transaction.sh' restart abc",
    stdin: "c2VjcmV0\n",
  });
});

test("through sudo, every host command is the one command `sudo -n -- bash -s`", () => {
  // A script on stdin already: the same stdin, its comment kept for reviewers and `ps`.
  assert.deepEqual(asSshUser("sudo", "bash -s # preflight sglang for stack b8", "echo checks\n"), { command: `${SUDO_COMMAND} # preflight sglang for stack b8`, stdin: "echo checks\n" });
  // A command line: in front of its stdin, as a group that ends the shell; named in a comment.
  assert.deepEqual(asSshUser("sudo", "bash /t.sh restart abc", "c2VjcmV0\n"), { command: `${SUDO_COMMAND} # bash /t.sh restart abc`, stdin: "{\nbash /t.sh restart abc\n}; exit $?\nc2VjcmV0\n" });
  // A script of several lines is not named on the command line.
  assert.equal(asSshUser("sudo", "echo a\necho b").command, SUDO_COMMAND);
});

/** Runs what the SSH user would run, with a local bash standing in for `sudo -n -- bash -s`. */
function runAsSshUser(command: string, stdin: string): { code: number; stdout: string; stderr: string } {
  const r = asSshUser("sudo", command, stdin);
  assert.ok(r.command.startsWith(SUDO_COMMAND));
  const out = spawnSync("bash", ["-s"], { input: r.stdin, encoding: "utf8" });
  return { code: out.status ?? -1, stdout: out.stdout, stderr: out.stderr };
}

test("the command reads its own stdin after its line; what it leaves unread is never run; its exit status is the step's", () => {
  // The restart reads one secret line of two: the second must not become a command.
  const r = runAsSshUser("read -r first; echo \"got $first\"; exit 7", "touch-me-not\necho RAN-AS-COMMAND\n");
  assert.deepEqual(r, { code: 7, stdout: "got touch-me-not\n", stderr: "" });
  // A command that reads all of stdin gets exactly what follows its line.
  assert.equal(runAsSshUser("cat", "line 1\nline 2\n").stdout, "line 1\nline 2\n");
  // A script of several lines whose first command reads stdin does not eat the rest of the script.
  assert.equal(runAsSshUser("cat >/dev/null\necho second line ran", "").stdout, "second line ran\n");
  assert.equal(runAsSshUser("false", "").code, 1);
});

test("sudo's own refusals are told from the command's failures", () => {
  assert.equal(sudoRefusal(1, "sudo: a password is required\n"), "sudo: a password is required");
  assert.equal(sudoRefusal(1, "Sorry, user deploy is not allowed to execute '/usr/bin/bash -s' as root on gpu1.\n"), "Sorry, user deploy is not allowed to execute '/usr/bin/bash -s' as root on gpu1.");
  assert.equal(sudoRefusal(1, "deploy is not in the sudoers file.\n"), "deploy is not in the sudoers file.");
  assert.equal(sudoRefusal(127, "bash: line 1: sudo: command not found\n"), "sudo is not installed");
  assert.equal(sudoRefusal(1, "sudo: sorry, you must have a tty to run sudo\n"), "sudo: sorry, you must have a tty to run sudo");
  // The command's own exit 1, also after a warning of a sudo that ran it, and sudo's words at
  // another status, are the command's.
  assert.equal(sudoRefusal(1, "grep: /etc/x: No such file or directory\n"), undefined);
  assert.equal(sudoRefusal(1, "sudo: unable to resolve host gpu1: Name or service not known\nno unit\n"), undefined);
  assert.equal(sudoRefusal(3, "sudo: a password is required\n"), undefined);
  assert.equal(sudoRefusal(0, ""), undefined);
});

test("the README shows the sudoers lines the tool needs, exactly as the restricted simulated host gets them", () => {
  const readme = fs.readFileSync(path.join(REPO_ROOT, "README.md"), "utf8");
  assert.ok(readme.includes(`\`\`\`\n${sudoersFor("deploy")}\`\`\``), `README has the block:\n${sudoersFor("deploy")}`);
  assert.match(sudoersFor("deploy"), /^deploy ALL=\(root\) NOPASSWD: \/usr\/bin\/bash -s$/m);
});
