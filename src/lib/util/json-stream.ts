import {closeSync, constants, openSync, readSync} from 'node:fs'
import {StringDecoder} from 'node:string_decoder'

/**
 * Reads JSON a piece at a time, so that a document listing every file of a release (an
 * install record, release.json: 15-20 MB for 100,000 files) never has to be held whole:
 * its objects and arrays are entered and walked, and each value, or a batch of an array's
 * elements, is handed to JSON.parse. This is not a tokenizer: it only finds where a value
 * ends (brackets and strings), and the engine's own JSON.parse parses and checks every
 * value. A streaming tokenizer written in JavaScript (@streamparser/json) took 3-4 times
 * as long as JSON.parse on a 16 MB install record; this takes about as long, and keeps
 * some 64 KiB of text.
 */

/** Reads bytes into the start of `buffer`; returns how many, 0 at the end. */
export type ByteSource = (buffer: Buffer) => number

/** The text is not JSON, or not the JSON the caller walks. */
export class JsonStreamError extends Error {}

/**
 * Thrown by a ByteSource that has no bytes yet but has not ended (an answer still coming
 * over the network): JsonReader.attempt() undoes the step, to be tried again once more came.
 */
export class MoreBytesNeeded extends Error {}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const COLON = 0x3a
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const CHUNK_BYTES = 64 * 1024
/** Text already consumed is dropped once there is this much of it. */
const KEEP_CHARS = 64 * 1024

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09

/** The index of the quote closing the string that opens at `open`, or -1 when the text ends first. */
function stringEnd(text: string, open: number): number {
  for (let at = text.indexOf('"', open + 1); at !== -1; at = text.indexOf('"', at + 1)) {
    let slashes = 0
    for (let before = at - 1; text.charCodeAt(before) === BACKSLASH; before--) slashes++
    if (slashes % 2 === 0) return at
  }

  return -1
}

/**
 * Where the value starting at `from` ends (just past it), or -1 when the text ends first.
 * A number, true, false or null ends at the first separator (or at the end of the text,
 * which only the caller knows is the end).
 */
function valueEnd(text: string, from: number): number {
  let depth = 0
  for (let at = from; at < text.length; at++) {
    const c = text.charCodeAt(at)
    if (c === QUOTE) {
      at = stringEnd(text, at)
      if (at === -1) return -1
      if (depth === 0) return at + 1
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (depth === 0) return at
      if (--depth === 0) return at + 1
    } else if (depth === 0 && (c === COMMA || c === COLON || isSpace(c))) return at
  }

  return -1
}

/**
 * A JSON document read from a ByteSource as it is walked: enterObject() then key() until
 * null, enterArray() then elements() until empty (or nextElement() before taking each
 * element like a key's value), value() for anything taken whole, and finish() to check
 * that nothing follows.
 */
export class JsonReader {
  private text = ''
  private at = 0
  /** Where the elements being gathered start: kept when more text is read. */
  private mark = -1
  /** Where the step being attempted started: kept too, so that it can be undone. */
  private hold = -1
  /** Characters dropped from the front of the text so far. */
  private dropped = 0
  private ended = false
  private readonly decoder = new StringDecoder('utf8')
  private readonly buffer: Buffer
  /** The containers entered, innermost last: whether an entry of it was read yet. */
  private open: Array<{array: boolean; first: boolean}> = []
  /** A key was read: its value comes next. */
  private afterKey = false

  constructor(
    private readonly source: ByteSource,
    chunkBytes = CHUNK_BYTES,
  ) {
    this.buffer = Buffer.allocUnsafe(chunkBytes)
  }

  /** Enters the object that comes next. */
  enterObject(): void {
    this.takeValue()
    this.expect(OPEN_BRACE, 'an object')
    this.open.push({array: false, first: true})
  }

  /** The next key of the object entered (its colon read), or null at the object's end. */
  key(): string | null {
    if (this.afterKey) this.fail('a value')
    if (!this.separator(false)) return null
    if (this.peek() !== QUOTE) this.fail('a key')
    const end = this.end()
    const key = this.parse(this.text.slice(this.at, end)) as string
    this.at = end
    this.expect(COLON, 'a colon')
    this.afterKey = true
    return key
  }

  /** Reads keys of the object entered, their values skipped, up to `wanted` (true: its value comes next) or the object's end (false). */
  seek(wanted: string): boolean {
    for (let key; (key = this.key()) !== null; ) {
      if (key === wanted) return true
      this.value()
    }

    return false
  }

  /** Enters the array that comes next. */
  enterArray(): void {
    this.takeValue()
    this.expect(OPEN_BRACKET, 'an array')
    this.open.push({array: true, first: true})
  }

  /** The next elements of the array entered, parsed at once, about `chars` characters of them; none at the array's end. */
  elements(chars = KEEP_CHARS): unknown[] {
    if (this.afterKey) this.fail('a value')
    if (!this.separator(true)) return []
    this.peek()
    this.mark = this.at
    try {
      let end = this.end()
      this.at = end
      // More of them while the batch is short, each after its comma.
      while (end - this.mark < chars && this.peek() === COMMA) {
        this.at++
        if (this.peek() === undefined) break
        end = this.end()
        this.at = end
      }

      return this.parse(`[${this.text.slice(this.mark, end)}]`) as unknown[]
    } finally {
      this.mark = -1
    }
  }

  /**
   * Whether another element of the array entered follows (its comma read); it is then
   * taken like a key's value: value(), enterObject() or enterArray(). False at the array's end.
   */
  nextElement(): boolean {
    if (this.afterKey) this.fail('a value')
    if (!this.separator(true)) return false
    this.afterKey = true
    return true
  }

  /** The next value, whole: the value of the key just read, or the document. */
  value(): unknown {
    this.takeValue()
    if (this.peek() === undefined) this.fail('a value')
    const end = this.end()
    const value = this.parse(this.text.slice(this.at, end))
    this.at = end
    return value
  }

  /**
   * Runs one step of the walk (any of the calls above, and what the caller does with its
   * result after the last read) over a source that may run dry before its end (it throws
   * MoreBytesNeeded): then the step is undone as if never begun and null returned, to be
   * run again when more bytes came. So an answer read from the network is walked as it
   * arrives, holding only the step's own text. The step must not act before its last read.
   */
  attempt<T>(step: () => T): {value: T} | null {
    const before = {open: this.open.map((entry) => ({...entry})), afterKey: this.afterKey}
    this.hold = this.at
    try {
      return {value: step()}
    } catch (error) {
      if (!(error instanceof MoreBytesNeeded)) throw error
      this.at = this.hold
      this.mark = -1
      this.open = before.open
      this.afterKey = before.afterKey
      return null
    } finally {
      this.hold = -1
    }
  }

  /** Characters read and not yet walked past: what a step that could not finish holds. */
  get pending(): number {
    return this.text.length - this.at
  }

  /** Characters walked past since the start of the document. */
  get position(): number {
    return this.dropped + this.at
  }

  /** Nothing but white space follows the document. */
  finish(): void {
    if (this.open.length > 0) this.fail('the end of every object and array')
    if (this.peek() !== undefined) this.fail('the end of the document')
  }

  /** A value is taken: the one of the key just read, or the document itself. */
  private takeValue(): void {
    if (this.open.length > 0 && !this.afterKey) this.fail('a key')
    this.afterKey = false
  }

  /** Before an entry: the comma after the previous one, or the container's end (false). */
  private separator(array: boolean): boolean {
    const current = this.open.at(-1)
    if (!current || current.array !== array) this.fail(array ? 'an array' : 'an object')
    const c = this.peek()
    if (c === (array ? CLOSE_BRACKET : CLOSE_BRACE)) {
      this.at++
      this.open.pop()
      return false
    }

    if (!current.first) {
      if (c !== COMMA) this.fail(`a comma or ${array ? ']' : '}'}`)
      this.at++
    }

    current.first = false
    return true
  }

  /** The next character that is not white space (its code; the position moved to it), or undefined at the end. */
  private peek(): number | undefined {
    for (;;) {
      const {text} = this
      while (this.at < text.length) {
        const c = text.charCodeAt(this.at)
        if (!isSpace(c)) return c
        this.at++
      }

      if (!this.fill()) return undefined
    }
  }

  private expect(code: number, what: string): void {
    if (this.peek() !== code) this.fail(what)
    this.at++
  }

  /** Where the value at the position ends, reading more as needed. */
  private end(): number {
    for (;;) {
      const end = valueEnd(this.text, this.at)
      if (end !== -1) return end
      // A number at the very end of the document ends there.
      if (!this.fill()) return this.text.length
    }
  }

  /** Reads the next chunk onto the text, dropping what was consumed; false at the end. */
  private fill(): boolean {
    if (this.ended) return false
    const keep = Math.min(this.at, ...[this.mark, this.hold].filter((at) => at !== -1))
    if (keep >= KEEP_CHARS) {
      this.text = this.text.slice(keep)
      this.dropped += keep
      this.at -= keep
      if (this.mark !== -1) this.mark -= keep
      if (this.hold !== -1) this.hold -= keep
    }

    const read = this.source(this.buffer)
    if (read === 0) {
      this.ended = true
      const rest = this.decoder.end()
      this.text += rest
      return rest.length > 0
    }

    this.text += this.decoder.write(this.buffer.subarray(0, read))
    return true
  }

  private parse(text: string): unknown {
    try {
      return JSON.parse(text)
    } catch (error) {
      throw new JsonStreamError((error as Error).message)
    }
  }

  private fail(what: string): never {
    const near = this.text.slice(this.at, this.at + 20)
    throw new JsonStreamError(near === '' ? `ends where ${what} was expected` : `${what} was expected at ${JSON.stringify(near)}`)
  }
}

/** A ByteSource reading bytes in memory. */
export function bufferSource(bytes: Buffer): ByteSource {
  let at = 0
  return (buffer) => {
    const count = bytes.copy(buffer, 0, at)
    at += count
    return count
  }
}

/** A ByteSource reading a descriptor from `position` on (pread: the descriptor's own offset is left alone). */
export function fdSource(fd: number, position = 0): ByteSource {
  let at = position
  return (buffer) => {
    const read = readSync(fd, buffer, 0, buffer.length, at)
    at += read
    return read
  }
}

/** Opens a file for JsonReader (never through a link, never waiting on a FIFO); the caller closes the descriptor. */
export function openJsonFile(path: string): {fd: number; reader: JsonReader} {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  try {
    return {fd, reader: new JsonReader(fdSource(fd))}
  } catch (error) {
    closeSync(fd)
    throw error
  }
}
