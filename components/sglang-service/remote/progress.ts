// Progress of long waits, shown by the Pulumi CLI as ephemeral status lines. Dynamic
// providers are not wired to the engine's log service by the SDK, so we talk to it
// directly: the engine passes its address as the provider's first argument.
import type * as grpcTypes from "@grpc/grpc-js";

let client: { log: (req: unknown, cb: (err: unknown) => void) => void } | undefined | null;

function engine() {
  if (client !== undefined) return client;
  const addr = process.argv.find((a, i) => i >= 2 && /^(127\.0\.0\.1|localhost|\[::1\]):\d+$/.test(a));
  if (!addr) return (client = null);
  const grpc: typeof grpcTypes = require("@grpc/grpc-js");
  const engrpc = require("@pulumi/pulumi/proto/engine_grpc_pb");
  client = new engrpc.EngineClient(addr, grpc.credentials.createInsecure());
  return client;
}

/**
 * Pure: a message as people see it: without the lines of the host scripts' protocol (`@@result
 * {...}`, `@@phase ...`: script.ts), which the provider reads and nobody else should; undefined
 * when nothing else is left. Every line this module logs passes here, so a host's output forwarded
 * whole (a removal's, handlers.ts) shows its words alone.
 */
export function shownText(message: string): string | undefined {
  const kept = message.split("\n").filter((line) => !line.startsWith("@@"));
  return kept.some((line) => line.trim() !== "") ? kept.join("\n") : undefined;
}

/** Logs a line against `urn` (ephemeral: replaced by the next one, gone when the step ends). */
export function progress(urn: string | undefined, text: string, ephemeral = true): Promise<void> {
  const message = shownText(text);
  if (message === undefined) return Promise.resolve();
  const c = engine();
  if (!c) {
    process.stderr.write(`${message}\n`);
    return Promise.resolve();
  }
  const engproto = require("@pulumi/pulumi/proto/engine_pb");
  const req = new engproto.LogRequest();
  req.setSeverity(engproto.LogSeverity.INFO);
  req.setMessage(message);
  req.setEphemeral(ephemeral);
  if (urn) req.setUrn(urn);
  return new Promise((resolve) => c.log(req, () => resolve()));
}
