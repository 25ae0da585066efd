import {type Stats, constants} from 'node:fs'
import {open} from 'node:fs/promises'

import {type LocalpuppetError, ReleaseError} from '../errors.js'

export interface BoundedReadOptions {
  /** Refuse files larger than this many bytes. */
  maxBytes: number
  /** How messages name the file: `input /etc/puppet/input.yaml`. */
  label: string
  /** Builds the error for a file that is not a regular file or is too large. */
  error: (message: string) => LocalpuppetError
  /** Refuse a symbolic link as the last component (files named by records). */
  noFollow?: boolean
  /** What the file should be, for the message (default `a regular file`). */
  expected?: string
  /** Called with the opened file's fstat first, before it is judged or read; may throw (a trust check that no swap can dodge). */
  inspect?: (info: Stats) => void
}

/**
 * Reads a regular file of at most `maxBytes`, fast whatever it is: a FIFO, /dev/zero,
 * /dev/urandom or a directory is refused from fstat(2) before a byte is read (opening
 * with O_NONBLOCK, so a FIFO without a writer does not block), and the read stops at the
 * cap even if the file grows meanwhile. Errors from the system (ENOENT, EACCES) are
 * thrown as they are, for the caller to name.
 */
export async function readBoundedFile(path: string, options: BoundedReadOptions): Promise<Buffer> {
  const flags = constants.O_RDONLY | constants.O_NONBLOCK | (options.noFollow ? constants.O_NOFOLLOW : 0)
  let handle
  try {
    handle = await open(path, flags)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP' && options.noFollow) throw options.error(`${options.label}: is a symbolic link, expected a file`)
    throw error
  }

  try {
    const info = await handle.stat()
    options.inspect?.(info)
    if (!info.isFile()) throw options.error(`${options.label}: ${describeFileType(info)}, expected ${options.expected ?? 'a regular file'}`)
    if (info.size > options.maxBytes) throw options.error(`${options.label}: larger than ${formatBytes(options.maxBytes)} (${info.size} bytes)`)
    const buffer = Buffer.allocUnsafe(Math.min(info.size, options.maxBytes) + 1)
    let length = 0
    for (;;) {
      const {bytesRead} = await handle.read(buffer, length, buffer.length - length, null)
      if (bytesRead === 0) break
      length += bytesRead
      if (length > options.maxBytes) throw options.error(`${options.label}: larger than ${formatBytes(options.maxBytes)}`)
      if (length === buffer.length) break
    }

    return buffer.subarray(0, length)
  } finally {
    await handle.close()
  }
}

/** Reads a stream (standard input) up to `maxBytes`; larger is an error, not a hang or a crash. */
export async function readBoundedStream(stream: NodeJS.ReadableStream, options: Omit<BoundedReadOptions, 'noFollow' | 'inspect'>): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of stream) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer)
    size += buffer.length
    if (size > options.maxBytes) {
      ;(stream as NodeJS.ReadableStream & {destroy?: () => void}).destroy?.()
      throw options.error(`${options.label}: larger than ${formatBytes(options.maxBytes)}`)
    }

    chunks.push(buffer)
  }

  return Buffer.concat(chunks)
}

/**
 * Decodes UTF-8 strictly: invalid bytes are an error naming the line they are on, never
 * silently replaced by U+FFFD. A byte order mark is kept, as the bytes are.
 */
export function decodeUtf8Strict(bytes: Buffer, label: string, error: (message: string) => LocalpuppetError): string {
  try {
    return new TextDecoder('utf-8', {fatal: true, ignoreBOM: true}).decode(bytes)
  } catch {
    const at = firstInvalidUtf8(bytes)
    let line = 1
    for (let i = 0; i < at; i++) if (bytes[i] === 0x0a) line++
    throw error(`${label}:${line}: invalid UTF-8 (byte 0x${bytes[at]?.toString(16).padStart(2, '0') ?? '??'} at offset ${at}); the file must be UTF-8 text`)
  }
}

/** Offset of the first byte that does not start or continue a valid UTF-8 sequence. */
function firstInvalidUtf8(bytes: Buffer): number {
  // Bisect on prefixes: a prefix decodes (in streaming mode) exactly when it holds no error yet.
  let low = 0
  let high = bytes.length
  while (low < high) {
    const mid = (low + high + 1) >> 1
    try {
      new TextDecoder('utf-8', {fatal: true, ignoreBOM: true}).decode(bytes.subarray(0, mid), {stream: true})
      low = mid
    } catch {
      high = mid - 1
    }
  }

  // The error shows at the byte that breaks a sequence: name the sequence's first byte.
  let start = low
  for (let i = low - 1; i >= Math.max(0, low - 3); i--) {
    if ((bytes[i] & 0xc0) === 0x80) continue
    if (bytes[i] >= 0xc0) start = i
    break
  }

  return Math.min(start, bytes.length - 1)
}

function describeFileType(info: {isDirectory(): boolean; isFIFO(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean; isSocket(): boolean}): string {
  if (info.isDirectory()) return 'is a directory'
  if (info.isFIFO()) return 'is a FIFO (named pipe)'
  if (info.isCharacterDevice() || info.isBlockDevice()) return 'is a device'
  if (info.isSocket()) return 'is a socket'
  return 'is not a regular file'
}

function formatBytes(bytes: number): string {
  return bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0 ? `${bytes / 1024 / 1024} MiB` : `${bytes} bytes`
}

/** Reads a body into memory up to maxBytes; longer is a 65 (an endless or huge body). */
export async function readBounded(body: NodeJS.ReadableStream & {destroy(): void}, where: string, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += (chunk as Buffer).length
    if (size > maxBytes) {
      body.destroy()
      throw new ReleaseError(`${where}: larger than ${maxBytes} bytes; refused`)
    }

    chunks.push(chunk as Buffer)
  }

  return Buffer.concat(chunks)
}
