import {readdir} from 'node:fs/promises'
import {join} from 'node:path'

import {readInstallRecord} from '../archive/install-record.js'
import {verifyRelease} from '../archive/verify.js'
import {NotFoundError} from '../errors.js'
import {sortTagsNewestFirst} from './release-ref.js'
import {realModuleDir} from './resolve.js'

export interface TagInfo {
  tag: string
  release: string
  /** Installed by localpuppet (install or install --git) with a record of its files. */
  recorded: boolean
  /** Whether it still matches its record; null without a record. */
  verified: boolean | null
  digest: string | null
}

export interface AppReleases {
  app: string
  trunk: boolean
  branches: string[]
  /** Newest semver first; tags that are not versions after, by name. */
  tags: TagInfo[]
}

/** Every app in the module directory (or just `app`) with its trunk, branches and tags. */
export async function listReleases(moduleDir: string, app?: string, options: {verify?: boolean} = {}): Promise<AppReleases[]> {
  const root = await realModuleDir(moduleDir)
  const apps = app === undefined ? (await subdirs(root)).filter((name) => /^[A-Za-z0-9]/.test(name)).sort() : [app]
  const result: AppReleases[] = []
  for (const name of apps) {
    const entries = await subdirs(join(root, name))
    if (app !== undefined && entries.length === 0) throw new NotFoundError(`app ${name}: not found in ${root}`)
    const tags: TagInfo[] = []
    for (const tag of sortTagsNewestFirst(await subdirs(join(root, name, 'tags')))) {
      const release = `${name}/tags/${tag}`
      const record = await readInstallRecord(root, release)
      const verified = record && options.verify !== false ? (await verifyRelease(root, release, record)).ok : null
      tags.push({tag, release, recorded: record !== null, verified, digest: record?.digest ?? null})
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
