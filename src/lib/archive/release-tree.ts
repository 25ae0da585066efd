import {createHash} from 'node:crypto'
import {createReadStream} from 'node:fs'
import {lstat, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import {ReleaseError} from '../errors.js'

/** One file of a release, as release.json and install records list it. */
export interface TreeFile {
  /** Relative to the release root, `/`-separated. */
  path: string
  size: number
  executable: boolean
  sha256: string
}

/**
 * Every regular file under a release root, sorted by path (byte order), with size,
 * executable bit and sha256. Anything that is neither a regular file nor a directory
 * (symlink, device, socket, FIFO) is refused with a message naming it: a release must
 * mean the same bytes wherever it is unpacked. Empty directories carry nothing and are
 * left out.
 */
export async function readReleaseTree(root: string, label: string, options: {concurrency?: number} = {}): Promise<TreeFile[]> {
  const paths = await listFiles(root, label)
  const files = new Array<TreeFile>(paths.length)
  let next = 0
  const worker = async () => {
    while (next < paths.length) {
      const index = next++
      const {path, size, executable} = paths[index]
      files[index] = {path, size, executable, sha256: await hashFile(join(root, path))}
    }
  }

  await Promise.all(Array.from({length: Math.min(options.concurrency ?? 8, paths.length)}, worker))
  return files
}

/** The files under a root, sorted, without hashing them: what is there and what kind. */
export async function listFiles(root: string, label: string): Promise<Array<Omit<TreeFile, 'sha256'>>> {
  const found: Array<Omit<TreeFile, 'sha256'>> = []
  const walk = async (dir: string, prefix: string): Promise<void> => {
    const entries = await readdir(dir)
    for (const name of entries) {
      const path = prefix === '' ? name : `${prefix}/${name}`
      const full = join(dir, name)
      const info = await lstat(full)
      if (info.isDirectory()) await walk(full, path)
      else if (info.isFile()) found.push({path, size: info.size, executable: (info.mode & 0o111) !== 0})
      else throw new ReleaseError(`${label}/${path}: ${describeKind(info)}; a release may hold only regular files and directories`)
    }
  }

  await walk(root, '')
  return found.sort((a, b) => compareBytes(a.path, b.path))
}

export async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path, {highWaterMark: 256 * 1024})) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

/**
 * The digest of a release: sha256 over one line per file, sorted by path:
 * `<sha256> <size> <x|-> <path>\n`. Two trees have the same digest exactly when they hold
 * the same paths with the same bytes and executable bits.
 */
export function treeDigest(files: TreeFile[]): string {
  const hash = createHash('sha256')
  for (const file of [...files].sort((a, b) => compareBytes(a.path, b.path))) {
    hash.update(`${file.sha256} ${file.size} ${file.executable ? 'x' : '-'} ${file.path}\n`)
  }

  return `sha256:${hash.digest('hex')}`
}

/** Sorts by UTF-8 bytes, the same on every machine and locale. */
export function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b))
}

function describeKind(info: {isSymbolicLink(): boolean; isBlockDevice(): boolean; isCharacterDevice(): boolean; isFIFO(): boolean; isSocket(): boolean}): string {
  if (info.isSymbolicLink()) return 'a symbolic link'
  if (info.isBlockDevice() || info.isCharacterDevice()) return 'a device'
  if (info.isFIFO()) return 'a FIFO'
  if (info.isSocket()) return 'a socket'
  return 'not a regular file'
}
