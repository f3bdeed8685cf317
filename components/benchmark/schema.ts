// Benchmark settings of a stack (`dflash-sglang:benchmark`): one zod schema for types,
// defaults and messages.
import { z } from "zod";

const positiveInt = z.number().int().positive();

export const benchmarkSchema = z
  .object({
    /** Run the benchmark after each reconfiguration. Defaults to true. */
    enabled: z.boolean().default(true),
    /** Change it (any string) to measure again without changing the server. Defaults to "1". */
    runId: z.string().default("1"),
    /** Measured single-stream requests per context length. Defaults to 3. */
    runs: positiveInt.max(100).default(3),
    /** Unmeasured requests first (warm caches, CUDA graphs). Defaults to 1. */
    warmupRuns: z.number().int().min(0).max(20).default(1),
    /** Output tokens per request (ignore_eos). Defaults to 256. */
    maxTokens: positiveInt.max(32768).default(256),
    /** Prompt length of the short-context runs, in tokens. Defaults to 128. */
    shortPromptTokens: positiveInt.default(128),
    /** Long-context prompt lengths, in tokens. Defaults to [8192, 32768]. */
    longContextTokens: z.array(positiveInt).default([8192, 32768]),
    /** Concurrency levels for throughput. Defaults to [1, 4, 16]. */
    concurrency: z.array(positiveInt.max(1024)).default([1, 4, 16]),
    /** Run the coding-correctness check. Defaults to true. */
    coding: z.boolean().default(true),
    /** Output budget of a coding answer (thinking models write long reasoning). Defaults to 1024. */
    codingMaxTokens: positiveInt.default(1024),
    /** Deadline of the whole benchmark. Defaults to 1800 s. */
    timeoutSeconds: z.number().positive().default(1800),
  })
  .strict();

export type BenchmarkSettingsInput = z.input<typeof benchmarkSchema>;
export type BenchmarkSettings = z.output<typeof benchmarkSchema>;
