import {createHash} from 'node:crypto'
import {type Readable, Transform} from 'node:stream'

import {Parser, type ReadEntry} from 'tar'

import {LocalpuppetError, ReleaseError} from '../errors.js'
import {faultPoint} from '../util/fault.js'
import {
  type ReleaseIndex,
  MAX_INDEX_BYTES,
  RELEASE_INDEX,
  SIGNATURE_FILE,
  indexFiles,
  isSafeRelativePath,
  parseIndex,
  parseReleasePath,
} from './release-index.js'
import {type CommitResult, type StagedFile, Staging} from './staging.js'
import {loadTrustedKeys, verifyIndexSignature} from './signature.js'

export interface InstallOptions {
  moduleDir: string
  /** --trust: key files or directories; the default trust directory is added when it exists. */
  trust?: string[]
  trustDir?: string | null
}

export interface InstallResult extends CommitResult {
  release: string
  signedBy: string | null
}

/** Entry types that are plain data; everything else (links, devices, FIFOs) is refused. */
const FILE_TYPES = new Set(['File', 'OldFile', 'ContiguousFile'])

/**
 * Installs a release archive made by `pack`, reading it once as a stream. Every entry is
 * checked before anything becomes visible: release.json first (and its signature, when
 * keys are trusted), then each file must be listed there, with its size and sha256, as a
 * regular file under a declared release. Any failure is a ReleaseError (65) naming the
 * entry, and the module directory is left exactly as it was.
 */
export async function installArchive(source: Readable, label: string, options: InstallOptions): Promise<InstallResult> {
  try {
    return await install(source, label, options)
  } catch (error) {
    // A refused archive is read no further: close it now, not when the GC finds its handle.
    source.destroy()
    throw error
  }
}

async function install(source: Readable, label: string, options: InstallOptions): Promise<InstallResult> {
  const trusted = await loadTrustedKeys(options.trust ?? [], options.trustDir)
  const archiveHash = createHash('sha256')
  // Hashed on the way through (a 'data' listener would start the stream before the
  // parser is attached, and lose its first bytes).
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      archiveHash.update(chunk)
      callback(null, chunk)
    },
  })
  source.on('error', (error) => hashing.destroy(error))
  const staging = await Staging.open(options.moduleDir)
  try {
    source.pipe(hashing)
    const {index, signedBy} = await extract(hashing, label, staging, trusted)
    // Dependencies first: a release never appears before what it needs.
    const releases = [...index.releases].reverse().map((entry) => ({...entry, mutable: parseReleasePath(entry.release)?.kind !== 'tag'}))
    const result = await staging.commit(releases, {type: 'archive', path: label, sha256: archiveHash.digest('hex')}, signedBy)
    return {...result, release: index.release, signedBy}
  } finally {
    await staging.close()
  }
}

async function extract(source: Readable, label: string, staging: Staging, trusted: Awaited<ReturnType<typeof loadTrustedKeys>>): Promise<{index: ReleaseIndex; signedBy: string | null}> {
  let index: ReleaseIndex | null = null
  let indexBytes: Buffer | null = null
  let signature: Buffer | null = null
  let signedBy: string | null = null
  let expected: ReturnType<typeof indexFiles> | null = null
  const received = new Set<string>()
  let failure: Error | null = null
  let entries = 0

  const parser = new Parser({strict: true})
  const done = new Promise<void>((resolve, reject) => {
    parser.on('error', (error: Error) => reject(failure ?? refuse(`${label}: not a valid release archive (${error.message})`)))
    parser.on('end', () => (failure ? reject(failure) : resolve()))
    source.on('error', (error: Error) => reject(failure ?? error))
  })

  const fail = (error: Error) => {
    failure ??= error
    source.unpipe(parser)
    source.destroy()
    parser.abort(error)
  }

  /** release.json's signature is checked once it is known whether one follows. */
  const checkSignature = () => {
    if (trusted.length > 0 && signedBy === null) signedBy = verifyIndexSignature(indexBytes!, signature, trusted, label)
  }

  parser.on('entry', (entry: ReadEntry) => {
    if (failure) return entry.resume()
    try {
      const position = entries++
      const path = entry.path
      if (position === 0) {
        if (path !== RELEASE_INDEX || !FILE_TYPES.has(entry.type)) throw refuse(`${label}: does not start with ${RELEASE_INDEX}; not an archive made by localpuppet pack`)
        if (entry.size > MAX_INDEX_BYTES) throw refuse(`${label}: ${RELEASE_INDEX} is too large`)
        collect(entry, (bytes) => {
          indexBytes = bytes
          index = parseIndex(bytes, label)
          expected = indexFiles(index)
        }, fail)
        return
      }

      if (position === 1 && path === SIGNATURE_FILE && FILE_TYPES.has(entry.type)) {
        collect(entry, (bytes) => {
          signature = bytes
          checkSignature()
        }, fail, 64 * 1024)
        return
      }

      checkSignature()
      const archivePath = path.replace(/\/$/, '')
      if (!isSafeRelativePath(archivePath)) throw refuse(`${label}: entry ${JSON.stringify(path)}: absolute or '..' path`)
      if (entry.type === 'Directory') {
        if (!index!.releases.some((r) => r.release === archivePath || r.release.startsWith(`${archivePath}/`) || archivePath.startsWith(`${r.release}/`))) {
          throw refuse(`${label}: entry ${JSON.stringify(path)}: outside the releases the archive declares`)
        }

        return entry.resume()
      }

      if (!FILE_TYPES.has(entry.type)) throw refuse(`${label}: entry ${JSON.stringify(path)}: ${describeType(entry.type)}; release archives hold only regular files`)
      const listed = expected!.get(archivePath)
      if (!listed) throw refuse(`${label}: entry ${JSON.stringify(path)}: not listed in ${RELEASE_INDEX}`)
      if (received.has(archivePath)) throw refuse(`${label}: entry ${JSON.stringify(path)}: appears twice`)
      received.add(archivePath)
      if (entry.size !== listed.file.size) throw refuse(`${label}: ${archivePath}: size ${entry.size} differs from ${listed.file.size} in ${RELEASE_INDEX}`)
      const file = staging.createFile(archivePath, listed.file.executable, parseReleasePath(listed.release)?.kind === 'tag')
      entry.on('data', (chunk: Buffer) => {
        if (failure) return
        try {
          file.write(chunk)
        } catch (error) {
          fail(error as Error)
        }
      })
      entry.on('end', () => {
        if (failure) return
        finishFile(file, archivePath, listed.file, label, fail)
        if (received.size === 1) faultPoint('install:extracting')
      })
    } catch (error) {
      entry.resume()
      fail(error as Error)
    }
  })

  source.pipe(parser)
  await done
  if (index === null) throw refuse(`${label}: empty archive; no ${RELEASE_INDEX}`)
  checkSignature()
  const missing = [...expected!.keys()].filter((path) => !received.has(path))
  if (missing.length > 0) throw refuse(`${label}: truncated or incomplete: ${missing.length} listed file(s) missing, first ${missing[0]}`)
  return {index, signedBy}
}

function finishFile(file: StagedFile, archivePath: string, listed: {sha256: string; size: number}, label: string, fail: (error: Error) => void): void {
  const written = file.finish()
  if (written.size !== listed.size || written.sha256 !== listed.sha256) {
    fail(refuse(`${label}: ${archivePath}: content does not match its sha256 in ${RELEASE_INDEX}`))
  }
}

function collect(entry: ReadEntry, onDone: (bytes: Buffer) => void, fail: (error: Error) => void, limit = MAX_INDEX_BYTES): void {
  const chunks: Buffer[] = []
  let size = 0
  entry.on('data', (chunk: Buffer) => {
    size += chunk.length
    if (size <= limit) chunks.push(chunk)
  })
  entry.on('end', () => {
    try {
      if (size > limit) throw refuse(`${entry.path}: too large`)
      onDone(Buffer.concat(chunks))
    } catch (error) {
      fail(error as Error)
    }
  })
}

function refuse(message: string): LocalpuppetError {
  return new ReleaseError(message)
}

function describeType(type: string): string {
  if (type === 'SymbolicLink') return 'a symbolic link'
  if (type === 'Link') return 'a hard link'
  if (type === 'CharacterDevice' || type === 'BlockDevice') return 'a device'
  if (type === 'FIFO') return 'a FIFO'
  return `an entry of type ${type}`
}
