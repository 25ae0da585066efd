import {readSync, writeSync} from 'node:fs'

import {TreeDigest} from '../tree/release-tree.js'
import type {ReleaseIndex, ReleaseSummary} from './release-index.js'

/** What pack says of one release it wrote: release.json lists its files, this only counts them. */
export type PackedRelease = Omit<ReleaseSummary, 'bytes'>

/** release.json's head and what each release holds, without the file list (which lies in the spool). */
export type PackedIndex = Omit<ReleaseIndex, 'releases'> & {releases: PackedRelease[]}

/** Text gathered before it is written to the spool: a few dozen files' worth. */
const BATCH_CHARS = 64 * 1024
/** What is read back from the spool at a time. */
const PIECE_BYTES = 256 * 1024

/**
 * release.json written as pack reads the files, so that memory does not grow with them:
 * each file's entry goes as JSON text to a spool file (an unlinked temporary file, read
 * back once when the archive is put together) and its digest line into a running sha256;
 * no object per file is kept. The bytes are exactly `serializeIndex`'s
 * (`JSON.stringify(index, null, 1)` and a newline): an archive does not depend on which
 * version packed it. Files must come in byte order of their path, as pack reads them.
 */
export class IndexWriter {
  private readonly releases: Array<PackedRelease & {start: number; end: number}> = []
  private current: {release: string; digest: TreeDigest; start: number; files: number; dirs: string[]} | null = null
  /** Bytes written to the spool so far, and text not written yet. */
  private position = 0
  private text = ''

  constructor(private readonly fd: number) {}

  /** The next release's files and empty directories follow. */
  begin(release: string): void {
    // The previous release's text was written out by its end(): the spool's end is where this one starts.
    this.current = {release, digest: new TreeDigest(), start: this.position, files: 0, dirs: []}
  }

  file(path: string, size: number, executable: boolean, sha256: string): void {
    const current = this.current!
    this.text += `${current.files === 0 ? '' : ',\n'}    {\n     "path": ${JSON.stringify(path)},\n     "size": ${size},\n     "executable": ${executable},\n     "sha256": "${sha256}"\n    }`
    current.digest.file(path, size, executable, sha256)
    current.files++

    if (this.text.length >= BATCH_CHARS) this.spill()
  }

  /** An empty directory (kept in memory: there are few). */
  dir(path: string): void {
    this.current!.dirs.push(path)
  }

  /** The release is complete: its digest (treeDigest's, computed as the files came). */
  end(): PackedRelease {
    const current = this.current!
    this.spill()
    const packed: PackedRelease = {release: current.release, digest: current.digest.end(current.dirs), files: current.files, ...(current.dirs.length > 0 ? {dirs: current.dirs} : {})}
    this.releases.push({...packed, start: current.start, end: this.position})
    this.current = null
    return packed
  }

  /**
   * The index as pack returns it, and release.json's bytes as pieces read back from the
   * spool (call `pieces` once per use). A piece is good until the next is asked for: one
   * buffer is read into again (a buffer per piece was 17 MB of garbage at 96,000 files).
   */
  finish(head: Omit<PackedIndex, 'releases' | 'format'>): {index: PackedIndex; size: number; pieces: () => Iterable<Buffer>} {
    const releases = this.releases.map(({start: _start, end: _end, ...release}) => release)
    // Format 1 unless a release keeps empty directories: older readers read the others.
    const index: PackedIndex = {format: releases.some((r) => r.dirs) ? 2 : 1, ...head, releases}
    // Everything but the file lists is small: the text around them, as JSON.stringify(index, null, 1) lays it out.
    const around: Buffer[] = []
    let text = `{\n "format": ${index.format},\n "app": ${JSON.stringify(index.app)},\n "tag": ${JSON.stringify(index.tag)},\n "release": ${JSON.stringify(index.release)},\n`
    text += ` "modulepath": [\n${index.modulepath.map((path) => `  ${JSON.stringify(path)}`).join(',\n')}\n ],\n "releases": [\n`
    this.releases.forEach((release, i) => {
      text += `${i === 0 ? '' : ',\n'}  {\n   "release": ${JSON.stringify(release.release)},\n   "digest": ${JSON.stringify(release.digest)},\n   "files": [`
      around.push(Buffer.from(text + (release.files === 0 ? '' : '\n')))
      text = release.files === 0 ? ']' : '\n   ]'
      if (release.dirs) text += `,\n   "dirs": [\n${release.dirs.map((dir) => `    ${JSON.stringify(dir)}`).join(',\n')}\n   ]`
      text += '\n  }'
    })
    around.push(Buffer.from(`${text}\n ]\n}\n`))
    const size = around.reduce((sum, piece) => sum + piece.length, 0) + this.releases.reduce((sum, release) => sum + release.end - release.start, 0)
    const fd = this.fd
    const releasesWithRanges = this.releases
    function* pieces(): Iterable<Buffer> {
      const buffer = Buffer.allocUnsafe(PIECE_BYTES)
      for (const [i, release] of releasesWithRanges.entries()) {
        yield around[i]
        for (let at = release.start; at < release.end; ) {
          const read = readSync(fd, buffer, 0, Math.min(PIECE_BYTES, release.end - at), at)
          if (read === 0) throw new Error('the index spool ended early')
          at += read
          yield buffer.subarray(0, read)
        }
      }

      yield around[around.length - 1]
    }

    return {index, size, pieces}
  }

  private spill(): void {
    if (this.text === '') return
    const bytes = Buffer.from(this.text)
    this.text = ''
    let offset = 0
    while (offset < bytes.length) offset += writeSync(this.fd, bytes, offset, bytes.length - offset, this.position + offset)
    this.position += bytes.length
  }
}
