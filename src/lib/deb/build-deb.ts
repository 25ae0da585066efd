import {createHash, randomBytes} from 'node:crypto'
import {closeSync, fchmodSync, futimesSync, mkdirSync, openSync, readSync, writeSync} from 'node:fs'
import {chmod, mkdir, readdir, rename, rm, stat, unlink, utimes, writeFile} from 'node:fs/promises'
import {dirname, isAbsolute, join, normalize, resolve} from 'node:path'

import {type InstallRecord, LOCALPUPPET_DIR, recordPath} from '../archive/install-record.js'
import {type TreeFile, hashFileSync, listFiles, treeDigest} from '../archive/release-tree.js'
import {DEFAULT_MODULE_DIR} from '../defaults.js'
import {ImmutabilityError, PuppetUnavailableError, ReleaseError, UsageError, describeFsError} from '../errors.js'
import {parseReleaseRef} from '../release/release-ref.js'
import {type ResolvedRelease, resolveRelease} from '../release/resolve.js'
import {capture} from '../util/capture.js'
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

/** Fixed so that output never depends on dpkg-deb's default (xz in Debian 12, zstd elsewhere). */
const COMPRESSION = ['-Zgzip', '-z6']
const COPY_BUFFER = Buffer.allocUnsafe(1024 * 1024)

/**
 * Builds one Debian package per release on the modulepath of a tag with Debian's own
 * dpkg-deb: the release's files under `<node-module-dir>/<app>/tags/<tag>/` (read-only,
 * as `install` leaves them) and its install record, so `verify`, `releases` and apply's
 * verification treat it as any installed tag. Depends names the packages of its
 * modulepath. The same tree gives the same bytes: entries sorted by dpkg-deb, owned by
 * root, every mtime and the ar dates at SOURCE_DATE_EPOCH, gzip level 6. Each .deb
 * appears only when complete.
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
  const work = join(outputDir, `.localpuppet-deb-${randomBytes(4).toString('hex')}.tmp`)
  try {
    await mkdir(work, {mode: 0o700})
  } catch (error) {
    throw describeFsError(error, `output directory ${outputDir}`)
  }

  try {
    const packages: DebPackage[] = []
    for (const {entry, modulepath} of entries) {
      const depends = modulepath.slice(1).map((dependency) => names.get(dependency.release) ?? nameOf(dependency))
      packages.push(await buildOne(entry, depends, {nodeModuleDir, epoch, work, outputDir}))
    }

    return {release: app.release, nodeModuleDir, packages}
  } finally {
    await removeTree(work)
  }
}

function nameOf(entry: ResolvedRelease): string {
  return packageName(entry.app, entry.release.slice(`${entry.app}/tags/`.length))
}

async function buildOne(entry: ResolvedRelease, depends: string[], context: {nodeModuleDir: string; epoch: number; work: string; outputDir: string}): Promise<DebPackage> {
  const tag = entry.release.slice(`${entry.app}/tags/`.length)
  const name = packageName(entry.app, tag)
  const version = packageVersion(tag)
  const root = join(context.work, name)
  const moduleDir = join(root, context.nodeModuleDir)
  const releaseDir = join(moduleDir, entry.release)
  await mkdir(releaseDir, {recursive: true, mode: 0o755})

  const files = await copyRelease(entry.path, releaseDir, entry.release, context.epoch)
  const digest = treeDigest(files)
  const record: InstallRecord = {
    format: 1,
    release: entry.release,
    digest,
    files,
    installedAt: new Date(context.epoch * 1000).toISOString(),
    source: {type: 'deb', package: name, version},
    signedBy: null,
  }
  const recordFile = recordPath(moduleDir, entry.release)
  await mkdir(dirname(recordFile), {recursive: true, mode: 0o755})
  await writeFile(recordFile, JSON.stringify(record) + '\n', {mode: 0o644})

  const control = controlFile({name, version, release: entry.release, digest, depends, files, nodeModuleDir: context.nodeModuleDir})
  await mkdir(join(root, 'DEBIAN'), {mode: 0o755})
  await writeFile(join(root, 'DEBIAN', 'control'), control, {mode: 0o644})
  const preinst = preinstScript({
    package: name,
    release: entry.release,
    digest,
    releaseDir: join(context.nodeModuleDir, entry.release),
    recordFile: recordPath(context.nodeModuleDir, entry.release),
    files,
  })
  await writeFile(join(root, 'DEBIAN', 'preinst'), preinst, {mode: 0o755})
  await fixDirectories(root, releaseDir, context.epoch)

  const file = join(context.outputDir, `${name}_${version}_all.deb`)
  const temp = join(context.work, `${name}.deb`)
  const built = await capture('dpkg-deb', ['--root-owner-group', ...COMPRESSION, '--build', root, temp], {env: {SOURCE_DATE_EPOCH: String(context.epoch), LC_ALL: 'C'}})
  if (built.spawnError) throw new PuppetUnavailableError(`dpkg-deb: cannot start (${built.spawnError.message})`, ['install dpkg (present on every Debian system): apt-get install dpkg'])
  if (built.exitCode !== 0) throw new ReleaseError(`dpkg-deb --build ${name}: ${firstLine(built.stderr) || `exit ${built.exitCode}`}`)
  const sha256 = hashFileSync(temp)
  const bytes = (await stat(temp)).size
  try {
    await rename(temp, file)
  } catch (error) {
    await unlink(temp).catch(() => {})
    throw describeFsError(error, `output ${file}`)
  }

  return {package: name, version, release: entry.release, digest, depends, file, sha256, bytes}
}

/**
 * Copies a release's files into the package tree, hashing them on the way (one read per
 * file), read-only as `install` leaves a tag: 0444, or 0555 when executable.
 */
async function copyRelease(from: string, to: string, label: string, epoch: number): Promise<TreeFile[]> {
  const files: TreeFile[] = []
  const made = new Set<string>([''])
  for (const listed of await listFiles(from, label)) {
    if (listed.path.includes('\n')) throw new ReleaseError(`${label}/${JSON.stringify(listed.path)}: a file name with a newline cannot be in a Debian package`)
    const parent = listed.path.includes('/') ? listed.path.slice(0, listed.path.lastIndexOf('/')) : ''
    if (!made.has(parent)) {
      mkdirSync(join(to, parent), {recursive: true, mode: 0o755})
      made.add(parent)
    }

    const hash = createHash('sha256')
    let size = 0
    const source = openSync(join(from, listed.path), 'r')
    const target = openSync(join(to, listed.path), 'wx', 0o600)
    try {
      let read: number
      while ((read = readSync(source, COPY_BUFFER, 0, COPY_BUFFER.length, null)) > 0) {
        const chunk = COPY_BUFFER.subarray(0, read)
        hash.update(chunk)
        writeSync(target, chunk)
        size += read
      }

      fchmodSync(target, listed.executable ? 0o555 : 0o444)
      futimesSync(target, epoch, epoch)
    } finally {
      closeSync(source)
      closeSync(target)
    }

    if (size !== listed.size) throw new ReleaseError(`${label}/${listed.path}: changed while packing; pack again`)
    files.push({path: listed.path, size, executable: listed.executable, sha256: hash.digest('hex')})
  }

  return files
}

/**
 * Directory modes and dates, deepest first (creating an entry changes its parent's mtime):
 * the release's own directories read-only (0555) as `install` leaves them, others 0755.
 */
async function fixDirectories(root: string, releaseDir: string, epoch: number): Promise<void> {
  const dirs: string[] = []
  const walk = async (dir: string) => {
    dirs.push(dir)
    for (const entry of await readdir(dir, {withFileTypes: true})) if (entry.isDirectory()) await walk(join(dir, entry.name))
  }

  await walk(root)
  for (const dir of dirs.reverse()) {
    const readOnly = dir === releaseDir || dir.startsWith(`${releaseDir}/`)
    await chmod(dir, readOnly ? 0o555 : 0o755)
    await utimes(dir, epoch, epoch)
  }
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

/** rm -r that also works for a non-root user: read-only directories are made writable first. */
async function removeTree(dir: string): Promise<void> {
  const walk = async (path: string) => {
    await chmod(path, 0o755).catch(() => {})
    for (const entry of await readdir(path, {withFileTypes: true}).catch(() => [])) if (entry.isDirectory()) await walk(join(path, entry.name))
  }

  await walk(dir)
  await rm(dir, {recursive: true, force: true})
}

function firstLine(text: string): string {
  return text.trim().split('\n')[0] ?? ''
}
