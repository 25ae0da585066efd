import {InputError, describeFsError} from '../errors.js'
import {decodeUtf8Strict, readBoundedFile, readBoundedStream} from '../util/bounded-read.js'
import {MAX_YAML_BYTES} from '../yaml.js'
import {type NodeInput, parseNodeInput} from './node-input.js'

/** Reads and validates input.yaml, or standard input when `path` is `-`. */
export async function readNodeInput(path: string, stdin: NodeJS.ReadableStream = process.stdin): Promise<NodeInput> {
  const {text, source} = await readInputText(path, stdin)
  return parseNodeInput(text, source)
}

/**
 * The input's text and how messages name it (`<stdin>` for `-`), unvalidated. Only a
 * regular file (or standard input) of at most MAX_YAML_BYTES is read: a FIFO, a device
 * or a directory is refused at once (65). Invalid UTF-8 is refused naming its line.
 */
export async function readInputText(path: string, stdin: NodeJS.ReadableStream = process.stdin): Promise<{text: string; source: string}> {
  const error = (message: string) => new InputError(message)
  if (path === '-') {
    const bytes = await readBoundedStream(stdin, {maxBytes: MAX_YAML_BYTES, label: '<stdin>', error})
    return {text: decodeUtf8Strict(bytes, '<stdin>', error), source: '<stdin>'}
  }

  let bytes: Buffer
  try {
    bytes = await readBoundedFile(path, {maxBytes: MAX_YAML_BYTES, label: `input ${path}`, error, expected: 'a YAML file'})
  } catch (caught) {
    if (caught instanceof InputError) throw caught
    if ((caught as NodeJS.ErrnoException).code) throw describeFsError(caught, `input file ${path}`)
    throw caught
  }

  return {text: decodeUtf8Strict(bytes, path, error), source: path}
}
