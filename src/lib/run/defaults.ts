/**
 * apply's defaults that commands show in --help. Kept apart from apply-run.ts so that
 * loading a command's flags does not load the run machinery (execa, js-yaml) at start-up.
 */

/** Run directories kept by default (--keep). */
export const DEFAULT_KEEP = 100

/** --max-age's default: --if-changed skips for at most this long after a full run, then enforces again. */
export const DEFAULT_MAX_AGE = '6h'
export const DEFAULT_MAX_AGE_MS = 6 * 3600 * 1000
