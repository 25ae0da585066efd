import {type Gzip, constants, createGzip, gzip} from 'node:zlib'


/** Uncompressed bytes per gzip member: large enough that restarting the dictionary costs nothing measurable. */
export const SEGMENT_BYTES = 1024 * 1024

/**
 * Compressed bytes per output chunk. Each engine reuses its output buffer until it is
 * full, so what is allocated grows with the compressed size, not with the number of
 * members (a fresh SEGMENT_BYTES output buffer per member was ~1 MB of garbage per MB of
 * input, and V8 frees such memory late). A text segment fits in one chunk.
 */
const OUTPUT_CHUNK = 64 * 1024

/**
 * gzip on several threads at once, as pigz does, with output that depends only on the
 * input: the stream is cut every SEGMENT_BYTES into independent gzip members (RFC 1952
 * allows any number; gzip, GNU tar and Node read them as one stream), compressed two at
 * a time on libuv's thread pool, and written in order. Each member's header has mtime 0
 * and OS 255 ("unknown"), so the same input gives the same bytes on every machine.
 *
 * Each of the `parallel` engines is one zlib stream kept for the whole run: a member is
 * written, finished (Z_FINISH) and the engine reset for the next, which gives the very
 * bytes a fresh gzip would.
 */
export class SegmentedGzip {
  private readonly inFlight: Array<Promise<Buffer[]>> = []
  /** Segment buffers whose compression is done, for the writer to fill again: memory stays flat. */
  private readonly free: Buffer[] = []
  private readonly idle: Gzip[] = []
  private readonly engines: Gzip[] = []

  constructor(
    private readonly sink: (chunk: Buffer) => Promise<void> | void,
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
    const member = this.compress(buffer, used)
    // Awaited in order below; a failure meanwhile must not count as unhandled.
    member.catch(() => {})
    this.inFlight.push(member)
    // `parallel` members compressing while this thread fills the next one.
    while (this.inFlight.length > this.parallel) await this.drainOne()
  }

  async end(): Promise<void> {
    try {
      while (this.inFlight.length > 0) await this.drainOne()
    } finally {
      for (const engine of this.engines) engine.close()
    }
  }

  private async drainOne(): Promise<void> {
    for (const chunk of await this.inFlight.shift()!) await this.sink(chunk)
  }

  private compress(buffer: Buffer, used: number): Promise<Buffer[]> {
    const engine = this.idle.pop() ?? this.engine()
    return new Promise<Buffer[]>((resolve, reject) => {
      const chunks: Buffer[] = []
      const onData = (chunk: Buffer) => chunks.push(chunk)
      const onError = (error: Error) => {
        engine.off('data', onData)
        reject(error)
      }

      engine.on('data', onData)
      engine.once('error', onError)
      engine.write(buffer.subarray(0, used))
      engine.flush(constants.Z_FINISH, () => {
        engine.off('data', onData)
        engine.off('error', onError)
        // zlib's documented reset() (deflateReset), missing from @types/node's Gzip.
        ;(engine as Gzip & {reset(): void}).reset()
        this.idle.push(engine)
        this.free.push(buffer)
        // The header's OS byte: 255, "unknown", whatever zlib was built for (as gzipMembers).
        // The engine's output buffer is reused until full, so the header can straddle two
        // chunks (a member whose first chunk was 5 bytes kept OS 3: pack was not
        // byte-identical run to run on large releases).
        setByte(chunks, 9, 255)
        resolve(chunks)
      })
    })
  }

  private engine(): Gzip {
    const engine = createGzip({level: this.level, chunkSize: OUTPUT_CHUNK})
    this.engines.push(engine)
    return engine
  }
}

/** Sets the byte at `offset` of chunks read as one buffer. */
function setByte(chunks: Buffer[], offset: number, value: number): void {
  for (const chunk of chunks) {
    if (offset < chunk.length) {
      chunk[offset] = value
      return
    }

    offset -= chunk.length
  }
}

/**
 * Data held in memory, cut every SEGMENT_BYTES into the members SegmentedGzip would make
 * of it (the same bytes), compressed at once on libuv's thread pool: this
 * thread goes on meanwhile.
 */
export async function gzipMembers(data: Buffer, level: number): Promise<Buffer[]> {
  const members: Array<Promise<Buffer>> = []
  for (let offset = 0; offset < data.length; offset += SEGMENT_BYTES) {
    const segment = data.subarray(offset, offset + SEGMENT_BYTES)
    members.push(
      new Promise((resolve, reject) => {
        gzip(segment, {level}, (error, member) => {
          if (error) return reject(error)
          member[9] = 255
          resolve(member)
        })
      }),
    )
  }

  return Promise.all(members)
}
