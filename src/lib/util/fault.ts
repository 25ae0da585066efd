/**
 * Crash injection for tests only: when LOCALPUPPET_TEST_FAULT names this point, the
 * process kills itself with SIGKILL right there, as a power cut or `kill -9` would.
 */
export function faultPoint(name: string): void {
  if (process.env.LOCALPUPPET_TEST_FAULT === name) process.kill(process.pid, 'SIGKILL')
}
