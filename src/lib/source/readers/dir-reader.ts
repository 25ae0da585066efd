import {createReadStream} from 'node:fs'
import {open} from 'node:fs/promises'
import {join, resolve} from 'node:path'

import {RepositoryUnavailableError, describeFsError} from '../../errors.js'
import {type TrustProblem, findTrustProblem} from '../../util/trusted-path.js'
import {REPOSITORY_INDEX} from '../../repository/repository-index.js'
import {type Transport, readBounded, writeChecked} from './reader.js'

/** A repository in a directory (a plain path or a file:// URL): a mount, a synced mirror, a USB stick. */
export class DirTransport implements Transport {
  readonly kind = 'dir' as const
  readonly label: string

  constructor(root: string) {
    this.label = resolve(root)
  }

  locate(path: string): string {
    return join(this.label, path)
  }

  /** The directory and every one leading to it, then its index: the archives are checked against the index. */
  trustProblem(): TrustProblem | null {
    return findTrustProblem(this.label, {what: 'release repository'}) ?? findTrustProblem(this.locate(REPOSITORY_INDEX), {what: 'release repository index', ancestors: false})
  }

  async read(path: string, maxBytes: number): Promise<Buffer | null> {
    const handle = await this.open(path, true)
    if (handle === null) return null
    return readBounded(handle.createReadStream(), this.locate(path), maxBytes)
  }

  async download(path: string, to: string, expected: {size: number; sha256: string}, onProgress?: (bytes: number) => void): Promise<void> {
    const handle = await this.open(path, false)
    await writeChecked(createReadStream('', {fd: handle!, highWaterMark: 1024 * 1024}), to, this.locate(path), expected, onProgress)
  }

  private async open(path: string, optional: boolean) {
    const full = this.locate(path)
    try {
      return await open(full, 'r')
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        if (optional) return null
        throw new RepositoryUnavailableError(`${full}: not found in the repository (the index names it)`)
      }

      throw describeFsError(error, full)
    }
  }
}
