import {createHash} from 'node:crypto'
import {lstat, readFile, readdir, readlink} from 'node:fs/promises'
import {join} from 'node:path'

import {Parser, type ReadEntry} from 'tar'

export const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex')

/** Every path under root with its type, mode, link count and content: equal snapshots, equal trees. */
export async function snapshot(root: string): Promise<Record<string, string>> {
  const result: Record<string, string> = {}
  const walk = async (dir: string, prefix: string): Promise<void> => {
    for (const name of (await readdir(dir)).sort()) {
      const path = prefix === '' ? name : `${prefix}/${name}`
      const full = join(dir, name)
      const info = await lstat(full)
      const mode = (info.mode & 0o7777).toString(8)
      if (info.isDirectory()) {
        result[path] = `dir ${mode}`
        await walk(full, path)
      } else if (info.isFile()) {
        result[path] = `file ${mode} links=${info.nlink} ${sha256(await readFile(full))}`
      } else if (info.isSymbolicLink()) {
        result[path] = `symlink -> ${await readlink(full)}`
      } else {
        result[path] = `other ${info.mode.toString(8)}`
      }
    }
  }

  await walk(root, '')
  return result
}

export interface TarEntry {
  path: string
  type: string
  mode?: number
  uid?: number
  gid?: number
  mtime?: Date
  uname?: string
  linkpath?: string
  data: Buffer
}

/** Every entry of a tar or .tar.gz with its header fields and data. */
export async function readEntries(archive: Buffer): Promise<TarEntry[]> {
  const entries: TarEntry[] = []
  const parser = new Parser({strict: true})
  parser.on('entry', (entry: ReadEntry) => {
    const read: TarEntry = {path: entry.path, type: entry.type, mode: entry.mode, uid: entry.uid, gid: entry.gid, mtime: entry.mtime, uname: entry.uname, linkpath: entry.linkpath, data: Buffer.alloc(0)}
    const chunks: Buffer[] = []
    entries.push(read)
    entry.on('data', (chunk: Buffer) => chunks.push(chunk))
    entry.on('end', () => {
      read.data = Buffer.concat(chunks)
    })
  })
  await new Promise<void>((resolve, reject) => {
    parser.on('end', resolve)
    parser.on('error', reject)
    parser.end(archive)
  })
  return entries
}
