import {stat} from 'node:fs/promises'
import {join} from 'node:path'

import {Parser, type ReadEntry} from 'tar'

import {LocalpuppetError, NotFoundError, ReleaseError, UsageError} from '../errors.js'
import {isValidVersionName} from '../release/release-ref.js'
import {startChild} from '../run/child.js'
import {faultPoint} from '../util/fault.js'
import {isSafeRelativePath} from './release-index.js'
import {type TreeFile, compareBytes, treeDigest} from './release-tree.js'
import {Staging} from './staging.js'
import type {InstallResult} from './install-archive.js'

export interface GitInstallOptions {
  moduleDir: string
  /** Anything git can read: a bare or working repository path, or a URL. */
  repo: string
  app: string
  tag: string
}

/**
 * Installs a git tag as `<app>/tags/<tag>`: the tag's tree (`git archive`) is the release
 * root. Same staging, checks, record and conflict rules as an archive: only regular files,
 * a tag installed with other content is a conflict (73), the same content a no-op.
 */
export async function installGitTag(options: GitInstallOptions): Promise<InstallResult & {commit: string}> {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(options.app)) throw new UsageError(`--app ${JSON.stringify(options.app)}: not a valid app name`)
  if (!isValidVersionName(options.tag)) throw new UsageError(`--tag ${JSON.stringify(options.tag)}: not a valid tag name`)
  const release = `${options.app}/tags/${options.tag}`
  const staging = await Staging.open(options.moduleDir)
  try {
    const repoDir = await localRepo(options.repo, options.tag, staging.dir)
    const commit = (await git(['-C', repoDir, 'rev-parse', '--verify', '--quiet', `refs/tags/${options.tag}^{commit}`], `tag ${options.tag} in ${options.repo}`)).trim()
    const files = await exportTree(repoDir, commit, release, staging)
    const result = await staging.commit([{release, digest: treeDigest(files), files, mutable: false}], {type: 'git', repo: options.repo, tag: options.tag, commit}, null)
    return {...result, release, signedBy: null, commit}
  } finally {
    await staging.close()
  }
}

/** A local repository as it is; anything else is cloned (the one tag, no history) into staging. */
async function localRepo(repo: string, tag: string, scratch: string): Promise<string> {
  try {
    if ((await stat(repo)).isDirectory()) return repo
  } catch {}

  if (!/^[a-z+]+:\/\/|^[^/]+@[^/]+:/.test(repo)) throw new NotFoundError(`git repository ${repo}: not found`)
  const dir = join(scratch, '.git-clone')
  await git(['clone', '--quiet', '--bare', '--depth', '1', '--branch', tag, '--', repo, dir], `clone of ${repo}`)
  return dir
}

/**
 * A git hook runs us with GIT_DIR and friends set for its own repository; our git
 * commands name their repository explicitly and must not inherit them.
 */
const GIT_ENV = {GIT_DIR: undefined, GIT_WORK_TREE: undefined, GIT_INDEX_FILE: undefined, GIT_OBJECT_DIRECTORY: undefined, GIT_ALTERNATE_OBJECT_DIRECTORIES: undefined, GIT_QUARANTINE_PATH: undefined, GIT_TERMINAL_PROMPT: '0'}

async function git(args: string[], what: string): Promise<string> {
  let out = ''
  let err = ''
  const child = startChild('git', args, {env: GIT_ENV, onStdout: (c) => (out += c), onStderr: (c) => (err += c)})
  const exit = await child.exited
  if (exit.spawnError) throw new LocalpuppetError('git-unavailable', 69, `git: ${exit.spawnError.message}`, ['install git (apt-get install git)'])
  if (exit.exitCode !== 0) throw new NotFoundError(`${what}: not found${err.trim() ? ` (${err.trim().split('\n').pop()})` : ''}`)
  return out
}

/** Streams `git archive` of the commit into staging, checking every entry. */
async function exportTree(repoDir: string, commit: string, release: string, staging: Staging): Promise<TreeFile[]> {
  const files: TreeFile[] = []
  let failure: Error | null = null
  const parser = new Parser({strict: true})
  const fail = (error: Error) => {
    failure ??= error
    child.killTree('SIGTERM')
  }

  parser.on('entry', (entry: ReadEntry) => {
    if (failure) return entry.resume()
    try {
      const path = entry.path.replace(/\/$/, '')
      if (!isSafeRelativePath(path)) throw new ReleaseError(`${release}: ${JSON.stringify(entry.path)}: unsafe path in the tag`)
      if (entry.type === 'Directory') return entry.resume()
      if (entry.type !== 'File' && entry.type !== 'OldFile') {
        throw new ReleaseError(`${release}/${path}: ${entry.type === 'SymbolicLink' ? 'a symbolic link' : `an entry of type ${entry.type}`}; a release may hold only regular files`)
      }

      const executable = ((entry.mode ?? 0) & 0o111) !== 0
      const file = staging.createFile(`${release}/${path}`, executable)
      entry.on('data', (chunk: Buffer) => {
        if (!failure) file.write(chunk)
      })
      entry.on('end', () => {
        const {sha256, size} = file.finish()
        files.push({path, size, executable, sha256})
        if (files.length === 1) faultPoint('install:extracting')
      })
    } catch (error) {
      entry.resume()
      fail(error as Error)
    }
  })

  const parsed = new Promise<void>((resolve, reject) => {
    parser.on('end', resolve)
    parser.on('error', (error: Error) => reject(failure ?? new ReleaseError(`${release}: git archive output unreadable (${error.message})`)))
  })
  let err = ''
  const child = startChild('git', ['-C', repoDir, 'archive', '--format=tar', commit], {
    env: GIT_ENV,
    onStdout: (chunk) => parser.write(chunk),
    onStderr: (chunk) => (err += chunk),
  })
  const exit = await child.exited
  parser.end()
  await parsed.catch((error: Error) => {
    failure ??= error
  })
  if (failure) throw failure
  if (exit.exitCode !== 0) throw new ReleaseError(`git archive of ${release} failed: ${err.trim() || `exit ${exit.exitCode}`}`)
  return files.sort((a, b) => compareBytes(a.path, b.path))
}
