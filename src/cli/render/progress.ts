import {terminalText} from '../../lib/util/terminal-text.js'

/** Bytes as a person reads them: 812 B, 3.4 MiB. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB']
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }

  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`
}

/**
 * A one-line download progress display (bytes and rate) rewritten in place on a
 * terminal, at most ten times a second. Only ever given to a TTY.
 */
export function progressPrinter(stream: NodeJS.WriteStream): {update(p: {release: string; bytes: number; total: number}): void; done(): void} {
  let last = 0
  let started = 0
  let current = ''
  let shown = false
  return {
    update({release, bytes, total}) {
      const now = Date.now()
      if (release !== current) {
        current = release
        started = now
      }

      if (now - last < 100 && bytes < total) return
      last = now
      const rate = bytes / Math.max(0.001, (now - started) / 1000)
      stream.write(`\r\u001B[2K${terminalText(release)}  ${formatBytes(bytes)} / ${formatBytes(total)}  ${formatBytes(Math.round(rate))}/s`)
      shown = true
    },
    done() {
      if (shown) stream.write('\r\u001B[2K')
      shown = false
    },
  }
}
