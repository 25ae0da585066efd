import type {Stats} from 'node:fs'

import {InputError, LocalpuppetError, describeFsError} from '../errors.js'
import {decodeUtf8Strict, readBoundedFile, readBoundedStream} from '../util/bounded-read.js'
import {openedPathTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import {MAX_YAML_BYTES} from '../yaml.js'
import {type NodeInput, parseNodeInput} from './node-input.js'

/** Reads and validates input.yaml, or standard input when `path` is `-`. */
export async function readNodeInput(path: string, stdin: NodeJS.ReadableStream = process.stdin): Promise<NodeInput> {
  const {text, source} = await readInputText(path, stdin)
  return parseNodeInput(text, source)
}

export interface InputText {
  text: string
  /** How messages name the input: its path, or `<stdin>`. */
  source: string
  /** With `trust.allow` (--allow-untrusted): the trust problems let through, for the run record. */
  untrusted: string[]
}

/**
 * The input's text and how messages name it (`<stdin>` for `-`), unvalidated. Only a
 * regular file (or standard input) of at most MAX_YAML_BYTES is read: a FIFO, a device
 * or a directory is refused at once (65). Invalid UTF-8 is refused naming its line.
 *
 * With `trust` (apply and plan: root applies what the input says, its classes, their
 * parameters and the release), the file and every directory leading to it must be owned
 * by root or the effective user and writable by nobody else: 77 naming it, before a byte
 * is read (`trust.allow`, --allow-untrusted, returns the line instead). Judged once open,
 * by path and by the opened file's fstat, so a file swapped in between is caught too.
 * With `noFollow`, a symbolic link is refused (65) without reading what it leads to.
 */
export async function readInputText(path: string, stdin: NodeJS.ReadableStream = process.stdin, trust?: {allow: boolean}, options: {noFollow?: boolean} = {}): Promise<InputText> {
  const error = (message: string) => new InputError(message)
  if (path === '-') {
    const bytes = await readBoundedStream(stdin, {maxBytes: MAX_YAML_BYTES, label: '<stdin>', error})
    return {text: decodeUtf8Strict(bytes, '<stdin>', error), source: '<stdin>', untrusted: []}
  }

  const untrusted: string[] = []
  // Judged once open, before anything else about it (not there: the open says so, 66).
  const inspect = trust
    ? (info: Stats) => {
        const problem = openedPathTrustProblem(path, info, {what: 'input file', content: true})
        refuseUnlessAllowed(problem, {allow: trust.allow, content: true})
        if (problem) untrusted.push(problem.message)
      }
    : undefined
  let bytes: Buffer
  try {
    bytes = await readBoundedFile(path, {maxBytes: MAX_YAML_BYTES, label: `input ${path}`, error, expected: 'a YAML file', inspect, noFollow: options.noFollow})
  } catch (caught) {
    if (caught instanceof LocalpuppetError) throw caught
    if ((caught as NodeJS.ErrnoException).code) throw describeFsError(caught, `input file ${path}`)
    throw caught
  }

  return {text: decodeUtf8Strict(bytes, path, error), source: path, untrusted}
}

