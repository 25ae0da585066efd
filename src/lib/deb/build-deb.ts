import {randomBytes} from 'node:crypto'
import {closeSync, openSync} from 'node:fs'
import {rename, stat, unlink} from 'node:fs/promises'
import {isAbsolute, join, normalize, resolve} from 'node:path'

import {type InstallRecord, LOCALPUPPET_DIR, recordPath} from '../install/install-record.js'
import {type ReleaseContent, type TreeFile, compareBytes, hashFileSync, readReleaseContent, treeDigest} from '../tree/release-tree.js'
import {DEFAULT_MODULE_DIR} from '../defaults.js'
import {ImmutabilityError, ReleaseError, UsageError, describeFsError} from '../errors.js'
import {parseReleaseRef} from '../release/release-ref.js'
import {type ResolvedRelease, resolveRelease} from '../release/resolve.js'
import {type DebEntry, writeDeb} from './deb-writer.js'
import {packageName, packageVersion} from './package-name.js'
import {preinstScript} from './preinst.js'

export interface DebPackOptions {
  moduleDir: string
  ref: string
  /** The directory the packages are written to [default: the working directory]. */
  outputDir?: string
  /** Where the packages put releases on the node [default: /etc/puppet/modules]. */
  nodeModuleDir?: string
  /** mtime of every entry; default SOURCE_DATE_EPOCH from the environment, else 0. */
  sourceDateEpoch?: number
}

export interface DebPackage {
  package: string
  version: string
  release: string
  digest: string
  /** The packages of the releases on its modulepath, in modulepath order. */
  depends: string[]
  file: string
  sha256: string
  bytes: number
}

export interface DebPackResult {
  release: string
  nodeModuleDir: string
  /** The app's package first, then one per release on its modulepath. */
  packages: DebPackage[]
}

/**
 * Builds one Debian package per release on the modulepath of a tag: the release's files
 * under `<node-module-dir>/<app>/tags/<tag>/` (read-only, as `install` leaves them) and
 * its install record, so `verify`, `releases` and apply's verification treat it as any
 * installed tag. Depends names the packages of its modulepath; a preinst keeps one owner
 * per tag (see preinst.ts). The same tree gives the same bytes: entries sorted by path,
 * root:root, every date at SOURCE_DATE_EPOCH (0 when unset), gzip level 6. Each .deb
 * appears only when complete. Mutable releases are refused: a package is named after its tag.
 */
export async function packDebs(options: DebPackOptions): Promise<DebPackResult> {
  const nodeModuleDir = checkNodeModuleDir(options.nodeModuleDir ?? DEFAULT_MODULE_DIR)
  const epoch = options.sourceDateEpoch ?? epochFromEnvironment()
  const ref = parseReleaseRef(options.ref, 'pack')
  const resolution = await resolveRelease(options.moduleDir, ref)
  const app = resolution.modulepath[0]
  if (app.kind !== 'tag') {
    throw new ImmutabilityError(`pack ${options.ref}: ${app.release} is mutable; packages carry tags`, ['tag a release and pack the tag'])
  }

  // Each package depends on its own release's modulepath, not on its dependant's.
  const entries: Array<{entry: ResolvedRelease; modulepath: ResolvedRelease[]}> = []
  for (const entry of resolution.modulepath) {
    const modulepath = entry === app ? resolution.modulepath : (await resolveRelease(resolution.moduleDir, entry.release)).modulepath
    entries.push({entry, modulepath})
  }

  const names = new Map(entries.map(({entry}) => [entry.release, nameOf(entry)]))
  const outputDir = resolve(options.outputDir ?? '.')
  const packages: DebPackage[] = []
  for (const {entry, modulepath} of entries) {
    const depends = modulepath.slice(1).map((dependency) => names.get(dependency.release) ?? nameOf(dependency))
    packages.push(await buildOne(entry, depends, {nodeModuleDir, epoch, outputDir}))
  }

  return {release: app.release, nodeModuleDir, packages}
}

function nameOf(entry: ResolvedRelease): string {
  return packageName(entry.app, entry.release.slice(`${entry.app}/tags/`.length))
}

async function buildOne(entry: ResolvedRelease, depends: string[], context: {nodeModuleDir: string; epoch: number; outputDir: string}): Promise<DebPackage> {
  const tag = entry.release.slice(`${entry.app}/tags/`.length)
  const name = packageName(entry.app, tag)
  const version = packageVersion(tag)
  const {files, dirs} = await readReleaseContent(entry.path, entry.release)
  const bad = [...files.map((file) => file.path), ...dirs].find((path) => path.includes('\n'))
  if (bad) throw new ReleaseError(`${entry.release}/${JSON.stringify(bad)}: a name with a newline cannot be in a Debian package`)
  const digest = treeDigest(files, dirs)
  const record: InstallRecord = {
    format: 1,
    release: entry.release,
    digest,
    files,
    ...(dirs.length > 0 ? {dirs} : {}),
    installedAt: new Date(context.epoch * 1000).toISOString(),
    source: {type: 'deb', package: name, version},
    signedBy: null,
  }

  const control: DebEntry[] = [
    {type: 'dir', path: './', mode: 0o755},
    {type: 'file', path: './control', mode: 0o644, data: Buffer.from(controlFile({name, version, release: entry.release, digest, depends, files, nodeModuleDir: context.nodeModuleDir}))},
    {
      type: 'file',
      path: './preinst',
      mode: 0o755,
      data: Buffer.from(
        preinstScript({
          package: name,
          release: entry.release,
          digest,
          moduleDir: context.nodeModuleDir,
          releaseDir: join(context.nodeModuleDir, entry.release),
          recordFile: recordPath(context.nodeModuleDir, entry.release),
          files,
          dirs,
        }),
      ),
    },
  ]

  const file = join(context.outputDir, `${name}_${version}_all.deb`)
  const temp = join(context.outputDir, `.${name}.${randomBytes(4).toString('hex')}.tmp`)
  let fd: number
  try {
    fd = openSync(temp, 'wx', 0o644)
  } catch (error) {
    throw describeFsError(error, `output directory ${context.outputDir}`)
  }

  try {
    try {
      await writeDeb(fd, control, dataEntries(entry, {files, dirs}, record, context.nodeModuleDir), context.epoch)
    } finally {
      closeSync(fd)
    }

    const sha256 = hashFileSync(temp)
    const bytes = (await stat(temp)).size
    await rename(temp, file)
    return {package: name, version, release: entry.release, digest, depends, file, sha256, bytes}
  } catch (error) {
    await unlink(temp).catch(() => {})
    if ((error as NodeJS.ErrnoException).path === temp) throw describeFsError(error, `output ${file}`)
    throw error
  }
}

/**
 * What dpkg unpacks, sorted: the module directory's parents, the release read-only as
 * `install` leaves a tag (directories 0555, empty ones included; files 0444 or 0555),
 * and its install record.
 */
function dataEntries(entry: ResolvedRelease, {files, dirs: emptyDirs}: ReleaseContent, record: InstallRecord, nodeModuleDir: string): DebEntry[] {
  const releaseRoot = `.${nodeModuleDir}/${entry.release}/`
  const entries: DebEntry[] = [{type: 'dir', path: './', mode: 0o755}]
  const dirs = new Set<string>()
  /** Every directory above `path` not listed yet, outermost first. */
  const parents = (path: string) => {
    for (let at = path.indexOf('/', 2); at !== -1; at = path.indexOf('/', at + 1)) {
      const dir = path.slice(0, at + 1)
      if (dirs.has(dir)) continue
      dirs.add(dir)
      entries.push({type: 'dir', path: dir, mode: dir.startsWith(releaseRoot) ? 0o555 : 0o755})
    }
  }

  parents(releaseRoot)
  for (const file of files) {
    const path = `${releaseRoot}${file.path}`
    parents(path)
    entries.push({type: 'file', path, mode: file.executable ? 0o555 : 0o444, source: join(entry.path, file.path), size: file.size, sha256: file.sha256})
  }

  // Empty directories are part of a release (its digest names them).
  for (const dir of emptyDirs) parents(`${releaseRoot}${dir}/`)

  const recordFile = `.${recordPath(nodeModuleDir, entry.release)}`
  parents(recordFile)
  entries.push({type: 'file', path: recordFile, mode: 0o644, data: Buffer.from(JSON.stringify(record) + '\n')})
  // Sorted by path bytes, as dpkg-deb sorts: a directory (`a/`) still precedes what it holds.
  return entries.sort((a, b) => compareBytes(a.path, b.path))
}

function controlFile(fields: {name: string; version: string; release: string; digest: string; depends: string[]; files: TreeFile[]; nodeModuleDir: string}): string {
  const kib = fields.files.reduce((sum, file) => sum + Math.ceil(file.size / 1024), 0) + 4
  const lines = [
    `Package: ${fields.name}`,
    `Version: ${fields.version}`,
    'Architecture: all',
    'Maintainer: localpuppet pack <root@localhost>',
    `Installed-Size: ${kib}`,
    ...(fields.depends.length > 0 ? [`Depends: ${fields.depends.join(', ')}`] : []),
    'Section: admin',
    'Priority: optional',
    `Description: localpuppet release ${fields.release}`,
    ` Puppet release ${fields.release}, installed for localpuppet under`,
    ` ${join(fields.nodeModuleDir, fields.release)} with its install record`,
    ` (digest ${fields.digest}).`,
  ]
  return lines.join('\n') + '\n'
}

function checkNodeModuleDir(dir: string): string {
  if (!isAbsolute(dir)) throw new UsageError(`--node-module-dir ${dir}: must be an absolute path (where the node keeps its releases)`)
  const clean = normalize(dir).replace(/\/+$/, '')
  if (clean === '') throw new UsageError('--node-module-dir /: releases cannot live at the root of the file system')
  if (/[:\n\\]/.test(clean)) throw new UsageError(`--node-module-dir ${JSON.stringify(dir)}: may not contain ':', '\\' or a newline`)
  if (clean.split('/').includes(LOCALPUPPET_DIR)) throw new UsageError(`--node-module-dir ${dir}: may not be inside ${LOCALPUPPET_DIR}`)
  return clean
}

function epochFromEnvironment(): number {
  const text = process.env.SOURCE_DATE_EPOCH
  if (text === undefined || text === '') return 0
  if (!/^\d{1,12}$/.test(text)) throw new UsageError(`SOURCE_DATE_EPOCH=${JSON.stringify(text)}: expected seconds since 1970 (an integer)`)
  return Number(text)
}
