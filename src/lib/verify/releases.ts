import {readdir} from 'node:fs/promises'
import {join} from 'node:path'

import {assertTrustedModuleDir, readRecordHead} from '../install/install-record.js'
import {verifyRelease} from './verify.js'
import {verifyJudged} from './verify-installed.js'
import {NotFoundError} from '../errors.js'
import {sortTagsNewestFirst} from '../release/release-ref.js'
import {realModuleDir} from '../release/resolve.js'

export interface TagInfo {
  tag: string
  release: string
  /** Installed by localpuppet (install or install --git) with a record of its files. */
  recorded: boolean
  /** Whether it still matches its record; null without a record. */
  verified: boolean | null
  digest: string | null
  /** What in the tag another user owns or can write (one line), when --allow-untrusted let it through; null otherwise. */
  untrusted: string | null
}

export interface AppReleases {
  app: string
  trunk: boolean
  branches: string[]
  /** Newest semver first; tags that are not versions after, by name. */
  tags: TagInfo[]
}

export interface ListOptions {
  /** false: do not verify tags against their records. */
  verify?: boolean
  /**
   * Judge trust as verify does, collecting here what --allow-untrusted let through: the
   * module dir and its .localpuppet (the records), every directory down to each recorded
   * tag, and what each holds. Anything untrusted is refused (77) unless allowUntrusted:
   * a tag is reported verified only when nobody else could change it or its record.
   */
  untrusted?: string[]
  allowUntrusted?: boolean
}

/** Every app in the module directory (or just `app`) with its trunk, branches and tags. */
export async function listReleases(moduleDir: string, app?: string, options: ListOptions = {}): Promise<AppReleases[]> {
  const root = await realModuleDir(moduleDir)
  const {untrusted, allowUntrusted} = options
  const seen = new Set<string>()
  if (untrusted) untrusted.push(...assertTrustedModuleDir(moduleDir, allowUntrusted, seen))
  const apps = app === undefined ? (await subdirs(root)).filter((name) => /^[A-Za-z0-9]/.test(name)).sort() : [app]
  const result: AppReleases[] = []
  for (const name of apps) {
    const entries = await subdirs(join(root, name))
    if (app !== undefined && entries.length === 0) throw new NotFoundError(`app ${name}: not found in ${root}`)
    const tags: TagInfo[] = []
    for (const tag of sortTagsNewestFirst(await subdirs(join(root, name, 'tags')))) {
      const release = `${name}/tags/${tag}`
      // The digest only: verifying reads the files a batch at a time.
      const record = readRecordHead(root, release)
      let verified: boolean | null = null
      let untrustedTree: string | null = null
      if (record && options.verify !== false) {
        const result = untrusted ? await verifyJudged(root, release, undefined, {allowUntrusted, seen, untrusted}, {cache: true}) : await verifyRelease(root, release, undefined, {judgeTrust: false, cache: true})
        verified = result.ok
        untrustedTree = result.untrusted
      }

      tags.push({tag, release, recorded: record !== null, verified, digest: record?.digest ?? null, untrusted: untrustedTree})
    }

    result.push({app: name, trunk: entries.includes('trunk'), branches: (await subdirs(join(root, name, 'branches'))).sort(), tags})
  }

  return result
}

async function subdirs(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, {withFileTypes: true})).filter((entry) => entry.isDirectory() || entry.isSymbolicLink()).map((entry) => entry.name)
  } catch {
    return []
  }
}
