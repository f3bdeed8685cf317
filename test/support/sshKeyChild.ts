// A provider-like process for the tests of the SSH key on the operator's machine
// (test/components/sglang-service/remote/key-agent.test.ts): it reads a Connection (JSON, the
// private key in it) from stdin and opens an Ssh to the host as a provider step does.
//   hold:    starts a command on the host that lasts until its input ends (as the provider's
//            holds do) and prints "mid-call" once the host runs it, then waits to be killed;
//   connect: runs one command, closes the connection and exits 0.
import { Connection, Ssh } from "../../components/sglang-service/remote/ssh";

async function main(mode: string): Promise<void> {
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  const conn = JSON.parse(text) as Connection;
  const ssh = await Ssh.open(conn);
  if (mode === "connect") {
    await ssh.check("true", "a command");
    ssh.close();
    return;
  }
  if (mode !== "hold") throw new Error(`unknown mode ${mode}: hold or connect`);
  ssh.hold("echo started; exec cat >/dev/null", (out) => {
    if (out.includes("started")) process.stdout.write("mid-call\n");
  });
}

main(process.argv[2] ?? "").catch((e: Error) => {
  process.stderr.write(`${e.message}\n`);
  process.exit(1);
});
