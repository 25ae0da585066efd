import {stat} from 'node:fs/promises'
import {join} from 'node:path'

import {LocalpuppetError, NotFoundError, ReleaseError, UsageError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import {isValidVersionName} from '../release/release-ref.js'
import {startChild} from '../util/child.js'
import {faultPoint} from '../util/fault.js'
import {isSafeRelativePath} from '../archive/release-index.js'
import {type TreeFile, compareBytes, treeDigest} from '../tree/release-tree.js'
import {Staging, describeInstallError} from './staging.js'
import {TarFormatError, TarReader} from '../archive/tar-reader.js'
import type {InstallResult} from './install-archive.js'
import {redactUrl} from '../util/terminal-text.js'

export interface GitInstallOptions {
  moduleDir: string
  /** Anything git can read: a bare or working repository path, or a URL. */
  repo: string
  app: string
  tag: string
  /** --allow-untrusted: install into a module directory others can write (see Staging.open). */
  allowUntrusted?: boolean
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
  const staging = await Staging.open(options.moduleDir, options).catch((error: unknown) => {
    throw describeInstallError(error, options.moduleDir)
  })
  try {
    const repoDir = await localRepo(options.repo, options.tag, staging.dir)
    const commit = (await git(['-C', repoDir, 'rev-parse', '--verify', '--quiet', `refs/tags/${options.tag}^{commit}`], `tag ${options.tag} in ${redactUrl(options.repo)}`)).trim()
    const files = await exportTree(repoDir, commit, release, staging)
    const result = await staging.commit([{release, digest: treeDigest(files), files, mutable: false}], {type: 'git', repo: redactUrl(options.repo), tag: options.tag, commit}, null)
    return {...result, release, signedBy: null, untrusted: staging.untrusted, commit}
  } catch (error) {
    throw describeInstallError(error, options.moduleDir)
  } finally {
    await staging.close()
  }
}

/** A local repository as it is; anything else is cloned (the one tag, no history) into staging. */
async function localRepo(repo: string, tag: string, scratch: string): Promise<string> {
  try {
    if ((await stat(repo)).isDirectory()) return repo
  } catch {
    // Not a local directory: a URL is cloned below, anything else is 66.
  }

  if (!/^[a-z+]+:\/\/|^[^/]+@[^/]+:/.test(repo)) throw new NotFoundError(`git repository ${redactUrl(repo)}: not found`)
  const dir = join(scratch, '.git-clone')
  await git(['clone', '--quiet', '--bare', '--depth', '1', '--branch', tag, '--', repo, dir], `clone of ${redactUrl(repo)}`)
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
  if (exit.exitCode !== 0) {
    // git refuses a repository another user owns (CVE-2022-24765): say so, with git's words.
    if (/dubious ownership/.test(err)) {
      throw new LocalpuppetError('untrusted-repository', ExitCode.invalid, `${what}: git refuses the repository: ${gitReason(err)}`, [
        'the repository belongs to another user; install from one you own, or, if you trust it, follow git\'s advice: git config --global --add safe.directory <path>',
      ])
    }

    throw new NotFoundError(`${what}: not found${err.trim() ? ` (${gitReason(err)})` : ''}`)
  }

  return out
}

/** git's own reason: its `fatal:` (or `error:`) line, else its last line. */
function gitReason(stderr: string): string {
  const lines = stderr.trim().split('\n').map((line) => line.trim()).filter(Boolean)
  const reason = lines.find((line) => /^(fatal|error):/.test(line)) ?? lines.at(-1) ?? ''
  return reason.replace(/^(fatal|error):\s*/, '')
}

/** Streams `git archive` of the commit into staging, checking every entry. */
async function exportTree(repoDir: string, commit: string, release: string, staging: Staging): Promise<TreeFile[]> {
  const files: TreeFile[] = []
  let failure: unknown = null
  const fail = (error: unknown) => {
    failure ??= error
    child.killTree('SIGTERM')
  }

  const reader = new TarReader((entry) => {
    const path = entry.path.replace(/\/$/, '')
    // git archive's pax global header carries the commit id: nothing to install.
    if (entry.type === 'GlobalExtendedHeader') return null
    if (!isSafeRelativePath(path)) throw new ReleaseError(`${release}: ${JSON.stringify(entry.path)}: unsafe path in the tag`)
    if (entry.type === 'Directory') return null
    if (entry.type !== 'File' && entry.type !== 'OldFile') {
      throw new ReleaseError(`${release}/${path}: ${entry.type === 'SymbolicLink' ? 'a symbolic link' : `an entry of type ${entry.type}`}; a release may hold only regular files`)
    }

    const executable = (entry.mode & 0o111) !== 0
    const file = staging.createFile(`${release}/${path}`, executable)
    return {
      data: (chunk) => file.write(chunk),
      end() {
        const {sha256, size} = file.finish()
        files.push({path, size, executable, sha256})
        if (files.length === 1) faultPoint('install:extracting')
      },
    }
  })

  let err = ''
  const child = startChild('git', ['-C', repoDir, 'archive', '--format=tar', commit], {
    env: GIT_ENV,
    onStdout(chunk) {
      if (failure) return
      try {
        reader.push(chunk)
      } catch (error) {
        fail(error)
      }
    },
    onStderr: (chunk) => (err += chunk),
  })
  const exit = await child.exited
  if (!failure && exit.exitCode === 0) {
    try {
      reader.finish()
    } catch (error) {
      failure = error
    }
  }

  if (failure instanceof TarFormatError) throw new ReleaseError(`${release}: git archive output unreadable (${failure.message})`)
  if (failure) throw failure
  if (exit.exitCode !== 0) throw new ReleaseError(`git archive of ${release} failed: ${err.trim() || `exit ${exit.exitCode}`}`)
  return files.sort((a, b) => compareBytes(a.path, b.path))
}
