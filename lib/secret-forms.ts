// Where a secret shows in a text, in every encoding it can take there: one check for the tests
// and the fault campaign.
/**
 * Pure: where a secret appears in a text, in any of the encodings it can take there: as is,
 * base64 (the restart's stdin carries the secret files base64-encoded; any alignment),
 * JSON-escaped, YAML single-quoted, URL-encoded. Returns the encodings found.
 */
export function secretForms(text: string, secret: string): string[] {
  const found: string[] = [];
  if (text.includes(secret)) found.push("plain");
  if (text.includes(JSON.stringify(secret).slice(1, -1)) && !found.includes("plain")) found.push("json");
  if (text.includes(encodeURIComponent(secret)) && !found.includes("plain")) found.push("url");
  // YAML's single-quoted form doubles a quote (its double-quoted form escapes as JSON does).
  if (secret.includes("'") && text.includes(secret.replace(/'/g, "''"))) found.push("yaml");
  // Inside a longer base64 text the secret starts at any of three byte alignments; from its
  // first byte on a 3-byte boundary, its whole 3-byte groups encode the same in any context.
  const bytes = Buffer.from(secret);
  for (let k = 0; k < 3; k++) {
    const whole = Math.floor((bytes.length - k) / 3) * 3;
    const core = bytes.subarray(k, k + whole).toString("base64");
    if (core.length >= 8 && text.includes(core)) {
      found.push("base64");
      break;
    }
  }
  return found;
}
