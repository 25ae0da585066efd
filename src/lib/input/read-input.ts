import {readFile, stat} from 'node:fs/promises'

import {InputError, describeFsError} from '../errors.js'
import {MAX_YAML_BYTES} from '../yaml.js'
import {type NodeInput, parseNodeInput} from './node-input.js'



/** Reads and validates input.yaml, or standard input when `path` is `-`. */
export async function readNodeInput(path: string, stdin: NodeJS.ReadableStream = process.stdin): Promise<NodeInput> {
  const {text, source} = await readInputText(path, stdin)
  return parseNodeInput(text, source)
}

/** The input's text and how messages name it (`<stdin>` for `-`), unvalidated. */
export async function readInputText(path: string, stdin: NodeJS.ReadableStream = process.stdin): Promise<{text: string; source: string}> {
  if (path === '-') return {text: await readStream(stdin), source: '<stdin>'}
  try {
    const info = await stat(path)
    if (info.isDirectory()) throw new InputError(`input ${path}: is a directory, expected a YAML file`)
    if (info.size > MAX_YAML_BYTES) throw new InputError(`input ${path}: larger than ${MAX_YAML_BYTES / 1024 / 1024} MiB`)
    return {text: await readFile(path, 'utf8'), source: path}
  } catch (error) {
    if (error instanceof InputError) throw error
    if ((error as NodeJS.ErrnoException).code) throw describeFsError(error, `input file ${path}`)
    throw error
  }
}

async function readStream(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of stream) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    size += buffer.length
    if (size > MAX_YAML_BYTES) throw new InputError(`<stdin>: larger than ${MAX_YAML_BYTES / 1024 / 1024} MiB`)
    chunks.push(buffer)
  }

  return Buffer.concat(chunks).toString('utf8')
}
