/** One entry's header, as the archive states it (pax records applied). */
export interface TarHeader {
  path: string
  /** node-tar's names: File, OldFile, ContiguousFile, Directory, SymbolicLink, Link, ... */
  type: string
  size: number
  mode: number
}

/** Where an entry's data goes; null from onEntry skips it. */
export interface EntrySink {
  data(chunk: Buffer): void
  end(): void
}

/** A tar stream that is not well formed: the message says where and why. */
export class TarFormatError extends Error {}

const TYPES: Record<string, string> = {
  '0': 'File',
  '\0': 'OldFile',
  '1': 'Link',
  '2': 'SymbolicLink',
  '3': 'CharacterDevice',
  '4': 'BlockDevice',
  '5': 'Directory',
  '6': 'FIFO',
  '7': 'ContiguousFile',
  g: 'GlobalExtendedHeader',
  x: 'ExtendedHeader',
  L: 'GNULongPath',
  K: 'GNULongLinkPath',
}

/** A pax header larger than this is refused (node-tar's limit for meta entries). */
const MAX_PAX_BYTES = 1024 * 1024
/** After the end-of-archive marker: zero padding up to this much is tolerated (GNU tar pads records). */
export const MAX_TRAILING_BYTES = 1024 * 1024

/**
 * A strict, streaming reader of ustar/pax tar data, fed with decompressed chunks in
 * order. It never buffers more than one header (or one pax header, at most 1 MiB):
 * entry data is handed to the sink as it arrives, so a huge entry costs no memory. It
 * stops at the end-of-archive marker (two zero blocks); what follows may only be zero
 * padding, at most MAX_TRAILING_BYTES of it. Throws TarFormatError on anything else.
 */
export class TarReader {
  /** Bytes of tar data consumed so far. */
  position = 0
  /** True once the end-of-archive marker was read. */
  ended = false
  private header = Buffer.alloc(512)
  private headerFill = 0
  private pax: {data: Buffer; fill: number} | null = null
  private paxRecords: Record<string, string> = {}
  private sink: EntrySink | null = null
  /** Data bytes left in the current entry, then padding bytes left. */
  private dataLeft = 0
  private padLeft = 0
  private inEntry = false
  private sawZeroBlock = false
  private trailing = 0

  constructor(private readonly onEntry: (header: TarHeader) => EntrySink | null) {}

  push(chunk: Buffer): void {
    let offset = 0
    while (offset < chunk.length) {
      if (this.ended) {
        this.trail(chunk.subarray(offset))
        return
      }

      if (this.inEntry) {
        offset += this.entryBytes(chunk, offset)
        continue
      }

      const take = Math.min(512 - this.headerFill, chunk.length - offset)
      chunk.copy(this.header, this.headerFill, offset, offset + take)
      this.headerFill += take
      offset += take
      this.position += take
      if (this.headerFill === 512) {
        this.headerFill = 0
        this.onHeader()
      }
    }
  }

  /** The input ended: anything short of the end-of-archive marker is a truncated archive. */
  finish(): void {
    if (this.ended) return
    if (this.inEntry || this.headerFill > 0) throw new TarFormatError(`truncated at byte ${this.position}, inside an entry`)
    throw new TarFormatError(`truncated at byte ${this.position}: no end-of-archive marker`)
  }

  private trail(rest: Buffer): void {
    this.trailing += rest.length
    if (this.trailing > MAX_TRAILING_BYTES) throw new TarFormatError(`more than ${MAX_TRAILING_BYTES} bytes of data after the end of the archive`)
    for (const byte of rest) if (byte !== 0) throw new TarFormatError('data after the end of the archive')
  }

  private entryBytes(chunk: Buffer, offset: number): number {
    if (this.dataLeft > 0) {
      const take = Math.min(this.dataLeft, chunk.length - offset)
      const piece = chunk.subarray(offset, offset + take)
      if (this.pax) {
        piece.copy(this.pax.data, this.pax.fill)
        this.pax.fill += take
      } else this.sink?.data(piece)
      this.dataLeft -= take
      this.position += take
      if (this.dataLeft === 0) this.endData()
      if (this.dataLeft === 0 && this.padLeft === 0) this.inEntry = false
      return take
    }

    const take = Math.min(this.padLeft, chunk.length - offset)
    this.padLeft -= take
    this.position += take
    if (this.padLeft === 0) this.inEntry = false
    return take
  }

  private endData(): void {
    if (this.pax) {
      this.paxRecords = parsePax(this.pax.data)
      this.pax = null
      return
    }

    const sink = this.sink
    this.sink = null
    sink?.end()
  }

  private onHeader(): void {
    const block = this.header
    const at = this.position - 512
    if (block.every((byte) => byte === 0)) {
      if (this.sawZeroBlock) {
        this.ended = true
        return
      }

      this.sawZeroBlock = true
      return
    }

    if (this.sawZeroBlock) throw new TarFormatError(`a lone zero block before byte ${at}`)
    if (!checksumValid(block)) throw new TarFormatError(`invalid header checksum at byte ${at}`)
    const typeFlag = String.fromCharCode(block[156])
    const type = TYPES[typeFlag] ?? `unknown (${JSON.stringify(typeFlag)})`
    let size = parseNumber(block, 124, 12)
    if (size === null) throw new TarFormatError(`invalid size field at byte ${at}`)
    const records = this.paxRecords
    this.paxRecords = {}
    if (records.size !== undefined) {
      if (!/^\d{1,16}$/.test(records.size) || !Number.isSafeInteger(Number(records.size))) throw new TarFormatError(`invalid pax size at byte ${at}`)
      size = Number(records.size)
    }

    const padding = (512 - (size % 512)) % 512
    if (type === 'ExtendedHeader') {
      if (size > MAX_PAX_BYTES) throw new TarFormatError(`pax header of ${size} bytes at byte ${at}`)
      if (Object.keys(records).length > 0) throw new TarFormatError(`two pax headers in a row at byte ${at}`)
      this.pax = {data: Buffer.alloc(size), fill: 0}
      this.begin(size, padding)
      return
    }

    const name = cString(block, 0, 100)
    const ustar = block.toString('latin1', 257, 262) === 'ustar'
    const prefix = ustar ? cString(block, 345, 155) : ''
    const path = records.path ?? (prefix ? `${prefix}/${name}` : name)
    const mode = parseNumber(block, 100, 8) ?? 0
    this.sink = this.onEntry({path, type, size, mode})
    this.begin(size, padding)
  }

  private begin(size: number, padding: number): void {
    this.dataLeft = size
    this.padLeft = padding
    this.inEntry = size + padding > 0
    if (size === 0) this.endData()
  }
}

function cString(block: Buffer, start: number, length: number): string {
  const end = block.indexOf(0, start)
  return block.toString('utf8', start, end === -1 || end > start + length ? start + length : end)
}

/** An octal field (NUL or space terminated), or base-256 when its top bit is set. */
function parseNumber(block: Buffer, start: number, length: number): number | null {
  if (block[start] & 0x80) {
    if (block[start] !== 0x80) return null
    let value = 0
    for (let i = start + 1; i < start + length; i++) value = value * 256 + block[i]
    return Number.isSafeInteger(value) ? value : null
  }

  const text = block.toString('latin1', start, start + length).replace(/[\0 ]+$/, '').replace(/^ +/, '')
  if (text === '') return 0
  if (!/^[0-7]+$/.test(text)) return null
  return Number.parseInt(text, 8)
}

function checksumValid(block: Buffer): boolean {
  const stored = parseNumber(block, 148, 8)
  let sum = 8 * 0x20
  for (let i = 0; i < 512; i++) if (i < 148 || i >= 156) sum += block[i]
  return stored === sum
}

/** `<length> <key>=<value>\n` records; only `path` and `size` matter here. */
function parsePax(data: Buffer): Record<string, string> {
  const records: Record<string, string> = {}
  let offset = 0
  while (offset < data.length) {
    const space = data.indexOf(0x20, offset)
    const length = space === -1 ? Number.NaN : Number(data.toString('latin1', offset, space))
    if (!Number.isSafeInteger(length) || length <= 0 || offset + length > data.length || data[offset + length - 1] !== 0x0a) {
      throw new TarFormatError('malformed pax header')
    }

    const record = data.toString('utf8', space + 1, offset + length - 1)
    const equals = record.indexOf('=')
    if (equals <= 0) throw new TarFormatError('malformed pax record')
    records[record.slice(0, equals)] = record.slice(equals + 1)
    offset += length
  }

  return records
}
