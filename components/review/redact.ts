// Pure: what a review shows of text it did not write (unit lines of a host, a preview's error,
// a setting's value), with anything that looks like a secret masked. On top of the masking of
// journal lines (parse.ts redactSecrets): a secret flag whose value is on the next line of a
// unit (`--api-key \` then the key), environment variables named like secrets, and the
// password of a URL.
import { redactSecrets } from "../sglang-service/parse";

/** Names of settings and variables that hold secrets by convention. */
export const SECRET_LIKE = /(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)/i;

/** NAME=value pairs, anywhere in a line (a unit's `Environment=A=1 B=2`, a shell line). */
const PAIR = /(^|[\s"'])([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|[^\s"']+)/g;

function maskPairs(line: string): string {
  return line.replace(PAIR, (m, pre: string, name: string, value: string) => {
    if (name === "Environment") return `${pre}${name}=${maskPairs(value)}`;
    return SECRET_LIKE.test(name) ? `${pre}${name}=<redacted>` : m;
  });
}

export function maskSecrets(text: string): string {
  // A secret flag's value on the next line (`--api-key \`) is redactSecrets' own, on the raw text.
  const lines = redactSecrets(text).split("\n");
  for (let i = 0; i < lines.length; i++) {
    // scheme://user:password@host
    lines[i] = maskPairs(lines[i]).replace(/\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*):[^\s@]*@/gi, "$1:***@");
  }
  return lines.join("\n");
}
