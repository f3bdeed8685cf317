// The one seeded pseudo-random generator of the project: property tests draw their cases with
// it, and the fault campaign its sequences, so that the same seed gives the same cases on
// every machine. mulberry32: small and good enough for drawing cases, not for secrets.
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A standard normal draw from `rand` (Box-Muller; two uniforms per draw): the one the replays, the rule's draws and the generated surfaces share. */
export function normal(rand: () => number): number {
  return Math.sqrt(-2 * Math.log(rand() || 1e-12)) * Math.cos(2 * Math.PI * rand());
}

/** Pure: one 32-bit seed from a seed and an index (a campaign's sequence, a surface of a family, a stream of a replay), well mixed (murmur3's finaliser), so that neighbouring seeds and indices draw unrelated streams. */
export function mix(seed: number, index: number): number {
  let h = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca77)) >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
