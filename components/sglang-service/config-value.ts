// Pure: a top-level setting as the program gets it from the engine. Pulumi keeps a stack's
// top-level values as text (a mapping or list as its JSON), so `sglangBuild: upstream` arrives
// as "upstream" and `speculative: {budget: 16}` as '{"budget":16}'. The program reads it back
// here, and the review (components/review/change.ts) reads the files through the same function,
// so both see one value.

/** Structured values arrive as JSON text, plain ones (e.g. `sglangBuild: upstream`) as-is. */
export function configValue(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
