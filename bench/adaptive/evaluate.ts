// How one sweep run is scored, in simulation where the truth is known: a single answer hits
// when its true value is within the tolerance of the true best; a tie set hits when it has at
// most `maxTied` configurations and holds the true best (or every one of them is within the
// tolerance: components/verdict/rule.ts answerIsRight, the rule the sweep's own chance counts).
// Shared by bench/adaptive-sweep.ts's strategies and baselines.
import { answerIsRight } from "../../components/verdict/rule";
export interface Scored {
  hit: boolean;
  /** True value of the answer's top / the true best. */
  ratio: number;
  tied: number;
  containsBest: boolean;
}

export const MAX_TIED = 3;

export function score(tied: string[], truth: Map<string, number>, tolerance: number, maxTied = MAX_TIED): Scored {
  const best = Math.max(...truth.values());
  const bestName = [...truth.entries()].find(([, v]) => v === best)![0];
  if (tied.length === 0) return { hit: false, ratio: 0, tied: 0, containsBest: false };
  const good = (n: string) => (truth.get(n) ?? 0) >= best * (1 - tolerance);
  const ratio = (truth.get(tied[0]) ?? 0) / best;
  const containsBest = tied.includes(bestName);
  const hit = tied.length <= maxTied && answerIsRight(tied.map(good), containsBest);
  return { hit, ratio, tied: tied.length, containsBest };
}
