import {createHash} from 'node:crypto'
import {closeSync, fstatSync, openSync, readSync, writeSync} from 'node:fs'
import {once} from 'node:events'
import {createGzip, gzipSync} from 'node:zlib'

import {Header} from 'tar/header'

import {ReleaseError} from '../errors.js'

/** An entry of a package's control or data archive, owned by root. */
export type DebEntry =
  | {type: 'dir'; path: string; mode: number}
  | {type: 'file'; path: string; mode: number; data: Buffer}
  /** Read from `source` while writing; its size and sha256 must still be what was hashed before. */
  | {type: 'file'; path: string; mode: number; source: string; size: number; sha256: string}

/** gzip level 6 for both archives: fixed, so output never depends on a default. */
const GZIP_LEVEL = 6
const BLOCK = 512
const READ_CHUNK = 1024 * 1024

/**
 * Writes a Debian binary package (deb(5)): an ar archive of `debian-binary`,
 * `control.tar.gz` and `data.tar.gz`, entries in the order given, every date at `epoch`,
 * owner root:root, GNU long names for paths ustar cannot hold. Files are streamed from
 * disk into gzip (compressing on libuv's threads while the next file is read and hashed),
 * straight into the ar member: nothing is copied or laid out first. The data member's
 * size is filled in once known.
 */
export async function writeDeb(fd: number, control: DebEntry[], data: DebEntry[], epoch: number): Promise<void> {
  writeSync(fd, Buffer.from('!<arch>\n'))
  writeMember(fd, 'debian-binary', Buffer.from('2.0\n'), epoch)
  writeMember(fd, 'control.tar.gz', gzipSync(Buffer.concat(control.flatMap((entry) => tarEntry(entry, epoch)).concat(Buffer.alloc(BLOCK * 2))), {level: GZIP_LEVEL}), epoch)

  // The data member's header is written with its size left blank, then filled in.
  // Only appended to so far: the end of the file is where we are.
  const headerAt = fstatSync(fd).size
  writeSync(fd, arHeader('data.tar.gz', 0, epoch))
  let size = 0
  const gzip = createGzip({level: GZIP_LEVEL})
  gzip.on('data', (chunk: Buffer) => {
    writeSync(fd, chunk)
    size += chunk.length
  })
  const ended = once(gzip, 'end')
  const put = async (chunk: Buffer) => {
    if (!gzip.write(chunk)) await once(gzip, 'drain')
  }

  try {
    for (const entry of data) {
      for (const block of tarEntry(entry, epoch)) await put(block)
      if (entry.type === 'file' && 'source' in entry) {
        await streamFile(entry, put)
        const pad = (BLOCK - (entry.size % BLOCK)) % BLOCK
        if (pad > 0) await put(Buffer.alloc(pad))
      }
    }

    await put(Buffer.alloc(BLOCK * 2))
    gzip.end()
    await ended
  } catch (error) {
    // Nothing more may reach the file: the caller closes and removes it.
    gzip.removeAllListeners('data')
    gzip.destroy()
    throw error
  }
  if (size % 2 === 1) writeSync(fd, Buffer.from('\n'))
  writeSync(fd, Buffer.from(String(size).padEnd(10)), 0, 10, headerAt + 48)
}

async function streamFile(entry: {path: string; source: string; size: number; sha256: string}, put: (chunk: Buffer) => Promise<void>): Promise<void> {
  const hash = createHash('sha256')
  let size = 0
  const fd = openSync(entry.source, 'r')
  try {
    for (;;) {
      // A fresh buffer each time: gzip keeps a reference until it has compressed it.
      const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK, Math.max(entry.size - size, 1)))
      const read = readSync(fd, chunk, 0, chunk.length, null)
      if (read === 0) break
      size += read
      if (size > entry.size) break
      hash.update(chunk.subarray(0, read))
      await put(chunk.subarray(0, read))
    }
  } finally {
    closeSync(fd)
  }

  if (size !== entry.size || hash.digest('hex') !== entry.sha256) throw new ReleaseError(`${entry.source}: changed while packing; pack again`)
}

/** The tar blocks of an entry (a GNU long-name entry first when ustar cannot hold the path); a file's data follows for `source`. */
function tarEntry(entry: DebEntry, epoch: number): Buffer[] {
  const size = entry.type === 'dir' ? 0 : 'data' in entry ? entry.data.length : entry.size
  const fields = {mode: entry.mode, uid: 0, gid: 0, uname: 'root', gname: 'root', mtime: new Date(epoch * 1000), size}
  const header = new Header({...fields, path: entry.path, type: entry.type === 'dir' ? 'Directory' : 'File'})
  header.encode()
  const blocks: Buffer[] = []
  if (header.needPax) {
    const name = Buffer.from(`${entry.path}\0`)
    const long = new Header({...fields, mode: 0o644, size: name.length, path: '././@LongLink', type: 'NextFileHasLongPath'})
    long.encode()
    blocks.push(long.block!, padded(name))
  }

  blocks.push(header.block!)
  if (entry.type === 'file' && 'data' in entry) blocks.push(padded(entry.data))
  return blocks
}

function padded(data: Buffer): Buffer {
  const pad = (BLOCK - (data.length % BLOCK)) % BLOCK
  return pad === 0 ? data : Buffer.concat([data, Buffer.alloc(pad)])
}

function writeMember(fd: number, name: string, data: Buffer, epoch: number): void {
  writeSync(fd, arHeader(name, data.length, epoch))
  writeSync(fd, data)
  if (data.length % 2 === 1) writeSync(fd, Buffer.from('\n'))
}

/** An ar member header as dpkg-deb writes it: name, date, owner 0/0, mode 100644, size. */
function arHeader(name: string, size: number, epoch: number): Buffer {
  const header = `${name.padEnd(16)}${String(epoch).padEnd(12)}${'0'.padEnd(6)}${'0'.padEnd(6)}${'100644'.padEnd(8)}${String(size).padEnd(10)}\`\n`
  return Buffer.from(header, 'latin1')
}
