import {UsageError} from '../errors.js'

const UNITS: Record<string, number> = {s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000}

/**
 * A duration as people write it for timers: `90s`, `30m`, `6h`, `1d`, `1h30m`, or a bare
 * number of seconds. 64 (naming the flag) for anything else, zero included.
 */
export function parseDuration(text: string, flag: string, options: {allowZero?: boolean} = {}): number {
  const trimmed = text.trim()
  let ms = 0
  if (/^\d+$/.test(trimmed)) ms = Number(trimmed) * 1000
  else if (/^(\d+[smhdw])+$/.test(trimmed)) {
    for (const [, amount, unit] of trimmed.matchAll(/(\d+)([smhdw])/g)) ms += Number(amount) * UNITS[unit]
  } else {
    throw new UsageError(`${flag} ${JSON.stringify(text)}: expected a duration such as 90s, 30m, 6h, 1d or 1h30m`)
  }

  const zeroAllowed = ms === 0 && options.allowZero === true
  if (!zeroAllowed && (ms <= 0 || !Number.isSafeInteger(ms))) throw new UsageError(`${flag} ${JSON.stringify(text)}: must be more than 0 and less than forever`)
  return ms
}

/** A duration in the same notation, to the two largest units: `45s`, `12m`, `6h`, `2h05m`, `3d4h`. */
export function formatAge(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000))
  if (seconds < 60) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes}m${seconds % 60 === 0 ? '' : `${String(seconds % 60).padStart(2, '0')}s`}`
  const hours = Math.floor(minutes / 60)
  if (hours < 24) return `${hours}h${minutes % 60 === 0 ? '' : `${String(minutes % 60).padStart(2, '0')}m`}`
  const days = Math.floor(hours / 24)
  return `${days}d${hours % 24 === 0 ? '' : `${hours % 24}h`}`
}
