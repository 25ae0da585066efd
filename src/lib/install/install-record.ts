import {mkdir, readFile, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import {writeFileAtomic} from '../util/atomic-write.js'
import {type TrustOptions, assertTrustedPaths} from '../util/trusted-path.js'
import type {TreeFile} from '../tree/release-tree.js'

/**
 * localpuppet's own directory inside a module directory: install records, the install
 * lock and staging. Never a modulepath entry (those are release roots), and no app name
 * can start with a dot, so Puppet never sees it as a module.
 */
export const LOCALPUPPET_DIR = '.localpuppet'

export type InstallSource =
  | {type: 'archive'; path: string; sha256: string}
  | {type: 'git'; repo: string; tag: string; commit: string}
  /** Installed by dpkg from a package made by `pack --format deb`: dpkg owns the files. */
  | {type: 'deb'; package: string; version: string}

/** What an installed tag held when it was installed; `verify` compares against it. */
export interface InstallRecord {
  format: 1
  release: string
  digest: string
  files: TreeFile[]
  /** Empty directories the release keeps; absent when there are none. */
  dirs?: string[]
  installedAt: string
  source: InstallSource
  /** The trusted key that signed the archive, or null. */
  signedBy: string | null
}

export function localpuppetDir(moduleDir: string): string {
  return join(moduleDir, LOCALPUPPET_DIR)
}

/**
 * What an install writes into and a run believes: the module directory (and the path to
 * it) and localpuppet's own directory in it (install records, the lock, staging). Whoever
 * can write either can swap a tag, or forge the record it is verified against.
 */
export function moduleDirTrustPaths(moduleDir: string): Array<{path: string} & TrustOptions> {
  const own = localpuppetDir(moduleDir)
  return [
    {path: moduleDir, what: 'module directory'},
    {path: own, what: 'module directory', below: moduleDir},
    {path: join(own, 'records'), what: 'install records directory', below: own},
  ]
}

/**
 * Refuses (UntrustedPathError, 77) a module directory another user owns or others can
 * write, unless `allow` (--allow-untrusted); returns the problems allowed.
 */
export function assertTrustedModuleDir(moduleDir: string, allow = false, seen?: Set<string>): string[] {
  return assertTrustedPaths(moduleDirTrustPaths(moduleDir), allow, seen)
}

/** `<module-dir>/.localpuppet/records/foo/tags/1.0.0.json` */
export function recordPath(moduleDir: string, release: string): string {
  return join(localpuppetDir(moduleDir), 'records', `${release}.json`)
}

export async function readInstallRecord(moduleDir: string, release: string): Promise<InstallRecord | null> {
  try {
    return JSON.parse(await readFile(recordPath(moduleDir, release), 'utf8')) as InstallRecord
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
}

export async function writeInstallRecord(moduleDir: string, record: InstallRecord): Promise<void> {
  const path = recordPath(moduleDir, record.release)
  await mkdir(join(path, '..'), {recursive: true, mode: 0o755})
  await writeFileAtomic(path, recordText(record), 0o644)
}

/**
 * `JSON.stringify(record)` and a newline, in pieces of about 64 KiB: a record lists every
 * file (15 MB for 100,000 files), and one string of it, then its bytes, is memory that
 * grows with the release.
 */
export function* recordText(record: InstallRecord): Iterable<string> {
  let text = '{'
  let first = true
  for (const [key, value] of Object.entries(record)) {
    if (value === undefined) continue
    text += `${first ? '' : ','}${JSON.stringify(key)}:`
    first = false
    if (key !== 'files') {
      text += JSON.stringify(value)
      continue
    }

    text += '['
    const files = value as TreeFile[]
    for (let i = 0; i < files.length; i++) {
      text += `${i === 0 ? '' : ','}${JSON.stringify(files[i])}`
      if (text.length >= 64 * 1024) {
        yield text
        text = ''
      }
    }

    text += ']'
  }

  yield `${text}}\n`
}

/** Release paths (`foo/tags/1.0.0`) that have an install record. */
export async function listRecordedReleases(moduleDir: string): Promise<string[]> {
  const root = join(localpuppetDir(moduleDir), 'records')
  const found: string[] = []
  let apps: string[]
  try {
    apps = await readdir(root)
  } catch {
    return []
  }

  for (const app of apps) {
    let tags: string[] = []
    try {
      tags = await readdir(join(root, app, 'tags'))
    } catch {}

    for (const name of tags) if (name.endsWith('.json')) found.push(`${app}/tags/${name.slice(0, -'.json'.length)}`)
  }

  return found.sort()
}
