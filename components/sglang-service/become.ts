// How a host step reaches root. Every step is "a command for the host" (a shell command line,
// and what goes to its stdin); here is the one place that turns it into what the SSH user runs.
// As root (host.become unset): the command itself. Through sudo (host.become: sudo): always the
// one command `sudo -n -- bash -s`, with the command line in front of its stdin, so that the
// SSH user's sudoers needs one line (README, "Hosts where root cannot log in"), `-n` never lets
// sudo wait for a password, and secrets still reach the host only on stdin: a step that reads
// its stdin (the restart's secret files) reads what follows its command line. Pure.

/** How the SSH user becomes root: unset when it is root already. */
export type Become = "sudo";

/** The command the SSH user runs for every host step through sudo: the sudoers line names it. */
export const SUDO_COMMAND = "sudo -n -- bash -s";

/** The sudoers drop-in that lets `user` run every host step, and nothing else by name (README). */
export function sudoersFor(user: string): string {
  return [
    `# dflash-sglang: ${user} runs every host step as root, each as \`${SUDO_COMMAND}\` with the script on stdin.`,
    "# That is root's whole power (see README, \"Hosts where root cannot log in\").",
    `Defaults:${user} env_keep += "SSH_CLIENT"`,
    `${user} ALL=(root) NOPASSWD: /usr/bin/bash -s`,
    "",
  ].join("\n");
}

/** What the SSH user runs for a host command, and its stdin. */
export interface SshUserCommand {
  command: string;
  stdin: string;
}

/** A command that already is a script on stdin (`bash -s`, perhaps with a comment naming it). */
const SCRIPT_ON_STDIN = /^bash -s(\s+#[^\n]*)?$/;

/**
 * Pure: what the SSH user runs for `command` (a shell command line for root) with `stdin`.
 * Through sudo, a command that is not a `bash -s` script already goes in front of its stdin
 * as a group that ends the shell (`{ ... }; exit $?`): the shell parses the whole group before
 * it runs it, so nothing the command reads from stdin (secrets) can be the rest of the script,
 * and nothing after it is ever run as a command. A one-line command is named in a comment on
 * the command line, for `ps` and for reviewers of `pulumi preview`.
 */
export function asSshUser(become: Become | undefined, command: string, stdin = ""): SshUserCommand {
  if (become === undefined) return { command, stdin };
  if (SCRIPT_ON_STDIN.test(command)) return { command: `${SUDO_COMMAND}${command.slice("bash -s".length)}`, stdin };
  const named = !command.includes("\n") && command.length <= 300 ? ` # ${command}` : "";
  return { command: `${SUDO_COMMAND}${named}`, stdin: `{\n${command}\n}; exit $?\n${stdin}` };
}

/**
 * sudo's words when it refuses to run anything (sudo 1.8 and 1.9): a password wanted, the
 * command not allowed, a terminal wanted (`requiretty`), the account refused. Its warnings
 * (`sudo: unable to resolve host ...`) precede commands it does run, so they are not here.
 */
const SUDO_REFUSED =
  /^sudo: (a password is required|a terminal is required|sorry, you must have a tty|no tty present|account validation failure|PAM account management error)|^Sorry, user \S+ (is not allowed|may not run sudo)|is not in the sudoers file/;

/**
 * Pure: sudo's own refusal (it ran nothing), from a step's exit status and stderr, as the line
 * sudo printed; undefined when sudo ran the command (whatever the command's own status).
 */
export function sudoRefusal(code: number, stderr: string): string | undefined {
  if (code === 127 && /sudo: (command )?not found/.test(stderr)) return "sudo is not installed";
  if (code !== 1) return undefined;
  return stderr
    .split("\n")
    .find((l) => SUDO_REFUSED.test(l))
    ?.trim();
}

/** What to tell a user whose sudo refused: who, where, that nothing ran, and what to do. */
export function sudoRefusedMessage(user: string, where: string, said: string): string {
  return (
    `the SSH user ${user} on ${where} cannot run the host steps as root with \`${SUDO_COMMAND}\` (host.become: sudo): sudo said "${said}". ` +
    `Nothing was run as root and nothing was changed. Let ${user} run \`/usr/bin/bash -s\` as root without a password (the sudoers lines in README, "Hosts where root cannot log in"), ` +
    "or log in as root (host.user: root, without host.become)."
  );
}
