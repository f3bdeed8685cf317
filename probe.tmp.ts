import { renderMarkdown } from "./components/benchmark/report";
import { ddtree, noSpeculation, resultOf } from "./test/support/benchmarkResults";
const at = (stack: string, configuration: any, spec: any, extra: any = {}) => ({ stack, configuration, result: spec ? resultOf(spec) : null, takenAt: spec ? "2026-12-02T10:05:00.000Z" : undefined, ...extra });
const B8 = at("b8t4-w2048", ddtree("b8t4-w2048", 8), { decode: 170.2, spread: 2.1, long: { 8192: 155.2 }, concurrency: { 1: 165, 4: 560 }, accept: 6.84 }, { restartSeconds: 421.5 });
const B16 = at("b16t4-w2048", ddtree("b16t4-w2048", 16), { decode: 181.7, spread: 1.4, long: { 8192: 166.7 }, concurrency: { 1: 175, 4: 620 }, accept: 7.4 }, { restartSeconds: 419 });
const BASE = at("baseline", noSpeculation(), { decode: 75, spread: 1, long: { 8192: 70 }, concurrency: { 1: 70, 4: 250 }, accept: null }, { takenAt: "2026-12-02T09:30:00.000Z", restartSeconds: 300 });
const WNONE = at("b8t4-wnone", ddtree("b8t4-wnone", 8, { draftWindowSize: "none", compactCache: false }), null);
console.log(renderMarkdown([B8, B16, BASE, WNONE]));
