import {constants} from 'node:fs'
import {access, readFile, realpath, stat} from 'node:fs/promises'
import {dirname} from 'node:path'

import {Scalar, isMap, isScalar, parseDocument} from 'yaml'

import {InputError, IoError, UsageError, describeFsError} from '../errors.js'
import {writeFileAtomic} from '../util/atomic-write.js'

/**
 * Refuses --save before anything runs when it could not succeed: standard input cannot
 * be rewritten (64), nor a file whose directory this user cannot write (the rewrite is a
 * rename in that directory; 74).
 */
export async function assertSavable(path: string): Promise<void> {
  if (path === '-') throw new UsageError('--save rewrites the input file; it cannot with standard input (-): name the input file')
  try {
    await access(path, constants.R_OK | constants.W_OK)
    // The rewrite is a rename beside the file itself (a link's target, for a link).
    await access(dirname(await realpath(path)), constants.W_OK | constants.X_OK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') {
      throw new IoError(`--save: cannot rewrite ${path}: ${code === 'EROFS' ? 'read-only file system' : 'permission denied (the file and its directory must be writable)'}`)
    }

    throw describeFsError(error, `input file ${path}`)
  }
}

/**
 * The input text with its top-level `app` set to `release`, and nothing else changed:
 * the value's bytes are replaced in place (same quoting style), so comments, key order,
 * quoting and every other value stay byte for byte. 65 when `app` is not a plain
 * top-level scalar (an alias, a merge key) that can be edited so.
 */
export function setInputApp(text: string, release: string, source: string): string {
  const doc = parseDocument(text, {keepSourceTokens: false})
  if (doc.errors.length > 0) throw new InputError(`${source}: ${doc.errors[0].message.split('\n')[0]}`)
  const pair = isMap(doc.contents) ? doc.contents.items.find((item) => isScalar(item.key) && item.key.value === 'app') : undefined
  const node = pair?.value
  if (!isScalar(node) || !node.range || typeof node.value !== 'string') {
    throw new InputError(`${source}: --save needs a top-level "app: REF" to rewrite (not an alias or merge key); edit it by hand`)
  }

  const [start, end] = node.range
  const before = text.slice(start, end)
  const anchor = /^&\S+\s+/.exec(before)?.[0] ?? ''
  const tag = /^(?:&\S+\s+)?(!\S*\s+)/.exec(before)?.[1] ?? ''
  const rendered = renderScalar(release, node.type)
  const updated = text.slice(0, start) + anchor + tag + rendered + text.slice(end)
  // Whatever the style, the result must read back as exactly that release and the rest unchanged.
  const check = parseDocument(updated)
  const value: unknown = isMap(check.contents) ? check.get('app') : undefined
  if (check.errors.length > 0 || value !== release || JSON.stringify(withoutApp(check.toJS())) !== JSON.stringify(withoutApp(doc.toJS()))) {
    const fallback = text.slice(0, start) + anchor + tag + JSON.stringify(release) + text.slice(end)
    if (parseDocument(fallback).get('app') === release) return fallback
    throw new InputError(`${source}: --save could not rewrite app safely; edit it by hand`)
  }

  return updated
}

/**
 * --save: rewrites the input file's `app` to `release` atomically (temp file, fsync,
 * rename), keeping its mode and owner. Reads the file afresh, so an edit made since the
 * run read it is kept. An input that is a link (`input.yaml -> nodes/web01.yaml`) has
 * the file it leads to rewritten, and stays a link. Returns the path.
 */
export async function saveInputApp(written: string, release: string): Promise<string> {
  let text: string
  let info: Awaited<ReturnType<typeof stat>>
  let path = written
  try {
    path = await realpath(written)
    info = await stat(path)
    text = await readFile(path, 'utf8')
  } catch (error) {
    throw describeFsError(error, `input file ${path}`)
  }

  const updated = setInputApp(text, release, path)
  if (updated === text) return written
  try {
    // Its owner kept through the new file's descriptor: a chown by path after the rename
    // would follow whatever link another user had put there meanwhile.
    const owner = process.geteuid?.() === 0 ? {uid: Number(info.uid), gid: Number(info.gid)} : undefined
    await writeFileAtomic(path, updated, Number(info.mode) & 0o7777, owner)
  } catch (error) {
    throw new IoError(`--save: cannot rewrite ${path}: ${(error as Error).message}`)
  }

  return written
}

function renderScalar(value: string, type: Scalar['type']): string {
  if (type === Scalar.QUOTE_DOUBLE) return JSON.stringify(value)
  if (type === Scalar.QUOTE_SINGLE) return `'${value.replaceAll("'", "''")}'`
  // A plain scalar stays plain when it reads back as the same string; else it is quoted.
  const plain = parseDocument(`app: ${value}\n`)
  return plain.errors.length === 0 && plain.get('app') === value && !/[#\n]/.test(value) ? value : JSON.stringify(value)
}

function withoutApp(data: unknown): unknown {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return data
  const {app: _app, ...rest} = data as Record<string, unknown>
  return rest
}
