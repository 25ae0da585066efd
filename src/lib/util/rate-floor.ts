import {PassThrough, type Readable} from 'node:stream'
import {timerDelay} from './timer-delay.js'

/**
 * The slowest body believed to be making progress, for every client of a server (fetch's
 * repository transport, the Prometheus client). A per-pause timeout bounds each silence,
 * so a server dripping a byte a second would hold a command for hours; a body slower than
 * this over a whole window is cut. 16 KiB/s (128 kbit/s) is far below any link a node or an
 * operator talks to its servers over, and bounds a request to about the window + its size
 * at that rate.
 */
export const MIN_BYTES_PER_SECOND = 16 * 1024

/**
 * The body, cut (destroyed with a LOCALPUPPET_TOO_SLOW error) when a whole window of
 * `windowMs` brings fewer bytes than MIN_BYTES_PER_SECOND would: a drip, or a server that
 * sends just enough to defeat the idle timeout. `where` names the server in the message.
 */
export function meterRate(body: Readable, where: string, windowMs: number): Readable {
  const metered = new PassThrough({highWaterMark: 1024 * 1024})
  const floor = Math.ceil((MIN_BYTES_PER_SECOND * windowMs) / 1000)
  let bytes = 0
  let seconds = 0
  const timer = setInterval(() => {
    seconds += windowMs / 1000
    if (bytes >= floor) {
      bytes = 0
      return
    }

    const message = `${where}: too slow: ${bytes} byte${bytes === 1 ? '' : 's'} in ${windowMs / 1000} s (at least ${MIN_BYTES_PER_SECOND / 1024} KiB/s expected; ${seconds} s into the body)`
    metered.destroy(Object.assign(new Error(message), {code: 'LOCALPUPPET_TOO_SLOW'}))
  }, timerDelay(windowMs))
  const stop = () => clearInterval(timer)
  body.on('data', (chunk: Buffer) => {
    bytes += chunk.length
  })
  body.on('error', (error) => metered.destroy(error))
  metered.on('close', () => {
    stop()
    body.destroy()
  })
  body.on('end', stop)
  body.pipe(metered)
  return metered
}
