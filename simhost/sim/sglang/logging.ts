// The levels of the simulated server's log lines and --log-level's filter, as Python's logging
// applies them. SGLang sets up its loggers with the level given, upper-cased
// (python/sglang/srt/utils/common.py, configure_logger: logging.basicConfig(level=getattr(logging,
// server_args.log_level.upper()))), and hands the same level to uvicorn (http_server.py), so
// uvicorn's own "INFO:     ..." lines follow it too. A record passes when its level is at least
// the configured one. What is not a logger record (an argparse error, a traceback printed before
// logging is set up, a progress bar, torch's C++ warnings) is always shown: level "PRINT". Pure.

export type LogLevel = "DEBUG" | "INFO" | "WARNING" | "ERROR" | "CRITICAL";

/** Python's logging levels by name, the aliases WARN and FATAL included (Lib/logging/__init__.py). */
const LEVELS: Record<string, number> = { NOTSET: 0, DEBUG: 10, INFO: 20, WARN: 30, WARNING: 30, ERROR: 40, FATAL: 50, CRITICAL: 50 };

/** The numeric level of --log-level's value as SGLang resolves it, or undefined for a name logging lacks. */
export function levelNumber(configured: string): number | undefined {
  return LEVELS[configured.toUpperCase()];
}

/** Whether a line of `level` shows under --log-level `configured` (an unknown name: as info). */
export function shown(level: LogLevel | "PRINT", configured: string): boolean {
  if (level === "PRINT") return true;
  return LEVELS[level] >= (levelNumber(configured) ?? LEVELS.INFO);
}
