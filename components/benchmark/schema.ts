// Benchmark settings of a stack (`dflash-sglang:benchmark`): one zod schema for types,
// defaults and messages.
import { z } from "zod";
import { listOf, MAX_CONTEXT_TOKENS, must, seconds, section, trueOrFalse, wholeNumber } from "../sglang-service/values";

export const benchmarkSchema = section("benchmark", {
  /** Run the benchmark after each reconfiguration. Defaults to true. */
  enabled: trueOrFalse("benchmark.enabled").default(true),
  /** Change it (any string) to measure again without changing the server. Defaults to "1". */
  runId: z.string(must("benchmark.runId", 'text (any; change it to measure again), e.g. "2"')).default("1"),
  /** Measured single-stream requests per context length. Defaults to 3. */
  runs: wholeNumber("benchmark.runs", 1, 100).default(3),
  /** Unmeasured requests first (warm caches, CUDA graphs). Defaults to 1. */
  warmupRuns: wholeNumber("benchmark.warmupRuns", 0, 20).default(1),
  /** Output tokens per request at most (a decode needs 2 to time; answers may end sooner). Defaults to 256. */
  maxTokens: wholeNumber("benchmark.maxTokens", 2, 32768).default(256),
  /**
   * Prompt length of the short-context runs, in tokens (a document, then a question of about
   * 40), at most MAX_CONTEXT_TOKENS (10,000,000, the longest context). Defaults to 128.
   */
  shortPromptTokens: wholeNumber("benchmark.shortPromptTokens", 64, MAX_CONTEXT_TOKENS).default(128),
  /**
   * Long-context prompt lengths, in tokens, each at most MAX_CONTEXT_TOKENS (10,000,000, the
   * longest context); at most 16 of them (each a phase of its own). Defaults to [8192, 32768].
   */
  longContextTokens: listOf("benchmark.longContextTokens", wholeNumber("benchmark.longContextTokens entry", 64, MAX_CONTEXT_TOKENS), `whole numbers of tokens from 64 to ${MAX_CONTEXT_TOKENS}, e.g. [8192, 32768]`, 16).default([8192, 32768]),
  /** Concurrency levels for throughput; at most 16 of them (each a phase of its own). Defaults to [1, 4, 16]. */
  concurrency: listOf("benchmark.concurrency", wholeNumber("benchmark.concurrency entry", 1, 1024), "whole numbers from 1 to 1024, e.g. [1, 4, 16]", 16).default([1, 4, 16]),
  /** Run the coding-correctness check. Defaults to true. */
  coding: trueOrFalse("benchmark.coding").default(true),
  /**
   * Output budget of a coding answer (thinking models write long reasoning). At most 131072
   * (128k tokens: the longest reasoning budgets of thinking models are 32k-80k). Defaults to 1024.
   */
  codingMaxTokens: wholeNumber("benchmark.codingMaxTokens", 1, 131072, "128k tokens").default(1024),
  /**
   * Deadline of the whole benchmark; the host's lock is held that long and 120 s more. At most
   * 14400 (4 h: a hundred runs at several long contexts). Defaults to 1800 s.
   */
  timeoutSeconds: seconds("benchmark.timeoutSeconds", 14400).default(1800),
});

export type BenchmarkSettingsInput = z.input<typeof benchmarkSchema>;
export type BenchmarkSettings = z.output<typeof benchmarkSchema>;
