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

/** A header that carries a credential (`x-api-key: K`, `Authorization: Basic K`), as a header line or a curl -H argument. */
const SECRET_HEADER = /\b((?:x-)?api-key|x-auth-token|authorization|proxy-authorization|cookie)(\s*:\s*)(?!<redacted>)[^\s"',]+(?:\s+(?!<redacted>)[^\s"',]+)?/gi;
/** A secret flag as one element of a JSON or YAML list and its value as the next (`["--api-key", "sk-..."]`). */
const SPLIT_FLAG = /(["']--[\w-]*(?:api-key|password|token|secret)["']\s*,\s*)(["'])(?:(?!\2).)*\2/gi;
/** A flag as one list item, its value the next one (`- --api-key` then `- sk-...` in YAML). */
const SPLIT_FLAG_LINE = /^\s*[-+]?\s*-\s+["']?--[\w-]*(?:api-key|password|token|secret)["']?\s*$/i;

export function maskSecrets(text: string): string {
  // A secret flag's value on the next line (`--api-key \`) is redactSecrets' own, on the raw text.
  const lines = redactSecrets(text).split("\n");
  for (let i = 0; i < lines.length; i++) {
    // scheme://user:password@host: the password runs to the last @ before the host (it may hold @).
    lines[i] = maskPairs(lines[i])
      .replace(/\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*):[^\s/]*@/gi, "$1:***@")
      .replace(SECRET_HEADER, (_m, name: string, sep: string) => `${name}${sep}<redacted>`)
      .replace(SPLIT_FLAG, "$1$2<redacted>$2");
    if (i > 0 && SPLIT_FLAG_LINE.test(lines[i - 1])) lines[i] = lines[i].replace(/^(\s*[-+]?\s*-\s+)\S.*$/, "$1<redacted>");
  }
  return lines.join("\n");
}
