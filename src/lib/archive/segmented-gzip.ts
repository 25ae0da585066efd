import {promisify} from 'node:util'
import {gzip} from 'node:zlib'


const gzipAsync = promisify(gzip)

/** Uncompressed bytes per gzip member: large enough that restarting the dictionary costs nothing measurable. */
export const SEGMENT_BYTES = 1024 * 1024

/**
 * gzip on several threads at once, as pigz does, with output that depends only on the
 * input: the stream is cut every SEGMENT_BYTES into independent gzip members (RFC 1952
 * allows any number; gzip, GNU tar and Node read them as one stream), compressed two at
 * a time on libuv's thread pool, and written in order. Each member's header has mtime 0
 * and OS 255 ("unknown"), so the same input gives the same bytes on every machine.
 */
export class SegmentedGzip {
  private readonly inFlight: Array<Promise<Buffer>> = []
  /** Segment buffers whose compression is done, for the writer to fill again: memory stays flat. */
  private readonly free: Buffer[] = []

  constructor(
    private readonly sink: (chunk: Buffer) => Promise<void>,
    private readonly level: number,
    private readonly parallel = 2,
  ) {}

  /** An empty SEGMENT_BYTES buffer to fill. */
  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafe(SEGMENT_BYTES)
  }

  /**
   * Compresses `used` bytes of a buffer from take() as one member; every member but the
   * last must be full. Resolves when the next may be written.
   */
  async write(buffer: Buffer, used: number): Promise<void> {
    // An output buffer larger than deflate's bound for the segment: each member is then
    // one task on the thread pool, not one round trip through this (busy) thread per 16 KiB.
    const member = gzipAsync(buffer.subarray(0, used), {level: this.level, chunkSize: SEGMENT_BYTES + 64 * 1024}).then((out) => {
      this.free.push(buffer)
      out[9] = 255
      return out
    })
    // Awaited in order below; a failure meanwhile must not count as unhandled.
    member.catch(() => {})
    this.inFlight.push(member)
    // `parallel` members compressing while this thread fills the next one.
    while (this.inFlight.length > this.parallel) await this.sink(await this.inFlight.shift()!)
  }

  async end(): Promise<void> {
    while (this.inFlight.length > 0) await this.sink(await this.inFlight.shift()!)
  }
}
