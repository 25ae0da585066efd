/**
 * The longest delay Node's timers keep: 2^31-1 ms, some 24.8 days. A longer one (a
 * `--timeout` or `--prometheus-timeout` of a month) fires after 1 ms, with a
 * TimeoutOverflowWarning on stderr: the longest wait given became none at all.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1

/** A delay for setTimeout, setInterval or a socket's timeout: at most MAX_TIMER_MS, which for one command is as good as never. */
export function timerDelay(ms: number): number {
  return Math.min(ms, MAX_TIMER_MS)
}
