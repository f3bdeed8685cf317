// The secret scan of the tests and the fault campaign (lib/secret-forms.ts), pure.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { secretForms } from "../../lib/secret-forms";

test("the secret scan finds a secret as is, JSON-escaped, YAML single-quoted, URL-encoded and base64 at any alignment", () => {
  const secret = 'sk-campaign-"7"/x+y';
  assert.deepEqual(secretForms(`{"apiKey":"${secret}"}`, secret), ["plain"]);
  assert.deepEqual(secretForms(JSON.stringify({ v: secret }), secret), ["json"]);
  assert.deepEqual(secretForms(`k=${encodeURIComponent(secret)}`, secret), ["url"]);
  for (const prefix of ["", "a", "ab", "api-key: "]) assert.deepEqual(secretForms(`stdin: ${Buffer.from(`${prefix}${secret}\n`).toString("base64")}`, secret), ["base64"], prefix);
  assert.deepEqual(secretForms(`api-key: '${"sk-o'k-1".replace(/'/g, "''")}'`, "sk-o'k-1"), ["yaml"]);
  assert.deepEqual(secretForms("nothing here", secret), []);
});
