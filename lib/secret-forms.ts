// Where a secret shows in a text, in every encoding it can take there: one check for the tests
// and the fault campaign.
/**
 * Pure: the texts a secret takes in each encoding it can take: as is, JSON-escaped, URL-encoded,
 * YAML single-quoted (only where it holds a quote), and base64 (the restart's stdin carries the
 * secret files base64-encoded): inside a longer base64 text the secret starts at any of three byte
 * alignments; from its first byte on a 3-byte boundary, its whole 3-byte groups encode the same
 * in any context (cores under 8 characters say nothing).
 */
export function secretPatterns(secret: string): { form: string; text: string }[] {
  const out = [
    { form: "plain", text: secret },
    { form: "json", text: JSON.stringify(secret).slice(1, -1) },
    { form: "url", text: encodeURIComponent(secret) },
    ...(secret.includes("'") ? [{ form: "yaml", text: secret.replace(/'/g, "''") }] : []),
  ];
  const bytes = Buffer.from(secret);
  for (let k = 0; k < 3; k++) {
    const core = bytes.subarray(k, k + Math.floor((bytes.length - k) / 3) * 3).toString("base64");
    if (core.length >= 8) out.push({ form: "base64", text: core });
  }
  return out;
}

/** Pure: where a secret appears in a text, in any of the encodings it can take there (secretPatterns). Returns the encodings found. */
export function secretForms(text: string, secret: string): string[] {
  const found: string[] = [];
  for (const p of secretPatterns(secret)) {
    if (found.includes(p.form) || !text.includes(p.text)) continue;
    // JSON and URL forms of a secret without special characters are the plain form.
    if ((p.form === "json" || p.form === "url") && found.includes("plain")) continue;
    found.push(p.form);
  }
  return found;
}
