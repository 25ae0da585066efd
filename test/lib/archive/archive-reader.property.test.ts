import {mkdir, mkdtemp, readFile, readdir, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {Readable} from 'node:stream'
import {gunzipSync, gzipSync} from 'node:zlib'

import test from 'ava'
import fc from 'fast-check'

import {installArchive} from '../../../src/lib/install/install-archive.js'
import {packRelease} from '../../../src/lib/archive/pack.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import {writeReleases, writeTree} from '../../helpers/temp.js'

/** What install documents: 65 refused, 73 conflict or lock, 74 I/O failure. Anything else (70, a raw error) is a bug. */
const DOCUMENTED = new Set([65, 73, 74])
/** Far beyond what any of these small inputs needs: a hang or a runaway loop trips it. */
const LIMIT_MS = 60_000

let genuine: Buffer
let tar: Buffer
let dir: string

test.before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'localpuppet-property-'))
  const src = join(dir, 'src')
  await writeReleases(src, {'foo/tags/1.0.0': ['dist/tags/2.0.1'], 'dist/tags/2.0.1': null})
  await writeTree(src, {
    'foo/tags/1.0.0/files/data.txt': 'some data\n'.repeat(50),
    'foo/tags/1.0.0/files/empty': null,
    'dist/tags/2.0.1/dist/files/big.txt': 'x'.repeat(5000),
  })
  await packRelease({moduleDir: src, ref: 'foo/tags/1.0.0', output: join(dir, 'genuine.tar.gz')})
  genuine = await readFile(join(dir, 'genuine.tar.gz'))
  tar = gunzipSync(genuine)
})

test.after.always(async () => {
  await rm(dir, {recursive: true, force: true})
})

let runs = 0

/** Installs the bytes into a fresh module dir: installed, or a documented refusal, in bounded time, leaving no debris. */
async function check(bytes: Buffer): Promise<void> {
  const moduleDir = join(dir, `m${runs++}`)
  await mkdir(moduleDir)
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${LIMIT_MS} ms`)), LIMIT_MS)
  })
  try {
    await Promise.race([installArchive(Readable.from([bytes]), 'input', {moduleDir, trustDir: null}), timeout])
  } catch (error) {
    if (!(error instanceof LocalpuppetError) || !DOCUMENTED.has(error.exitCode)) throw error
    // A refusal leaves nothing behind but (maybe) the records directory.
    const own = join(moduleDir, '.localpuppet')
    const left = await readdir(own).catch(() => [] as string[])
    if (left.some((name) => name !== 'records')) throw new Error(`debris left after ${error.message}: ${left.join(', ')}`)
  } finally {
    clearTimeout(timer)
    await rm(moduleDir, {recursive: true, force: true})
  }

  if (process.memoryUsage().rss > 1024 ** 3) throw new Error(`memory grew to ${process.memoryUsage().rss} bytes`)
}

/** Edits of a byte string: flips, cuts, insertions and appended data, anywhere. */
const edits = (length: number) =>
  fc.array(
    fc.oneof(
      fc.record({kind: fc.constant('flip' as const), at: fc.nat(length - 1), value: fc.integer({min: 1, max: 255})}),
      fc.record({kind: fc.constant('cut' as const), at: fc.nat(length)}),
      fc.record({kind: fc.constant('insert' as const), at: fc.nat(length), data: fc.uint8Array({minLength: 1, maxLength: 1024})}),
      fc.record({kind: fc.constant('append' as const), data: fc.uint8Array({minLength: 1, maxLength: 4096})}),
      fc.record({kind: fc.constant('zeros' as const), size: fc.integer({min: 1, max: 4 * 1024 * 1024})}),
    ),
    {minLength: 1, maxLength: 4},
  )

function apply(source: Buffer, changes: Array<{kind: string; at?: number; value?: number; data?: Uint8Array; size?: number}>): Buffer {
  let bytes = Buffer.from(source)
  for (const change of changes) {
    const at = Math.min(change.at ?? 0, bytes.length)
    if (change.kind === 'flip' && bytes.length > 0) bytes[at % bytes.length] ^= change.value!
    else if (change.kind === 'cut') bytes = bytes.subarray(0, at)
    else if (change.kind === 'insert') bytes = Buffer.concat([bytes.subarray(0, at), change.data!, bytes.subarray(at)])
    else if (change.kind === 'append') bytes = Buffer.concat([bytes, change.data!])
    else if (change.kind === 'zeros') bytes = Buffer.concat([bytes, gzipSync(Buffer.alloc(change.size!))])
  }

  return bytes
}

test('any edit of the compressed archive ends in an install or a documented exit, in bounded time and memory', async (t) => {
  await fc.assert(fc.asyncProperty(edits(genuine.length), async (changes) => check(apply(genuine, changes))), {numRuns: 150})
  t.pass()
})

test('any edit of the tar inside a valid gzip ends in an install or a documented exit, in bounded time and memory', async (t) => {
  // Past the gzip layer: the tar reader and the checks after it meet the damage.
  await fc.assert(fc.asyncProperty(edits(tar.length), async (changes) => check(gzipSync(apply(tar, changes)))), {numRuns: 200})
  t.pass()
})

test('arbitrary bytes, gzipped or not, end in a documented exit', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.uint8Array({maxLength: 8192}), fc.boolean(), async (data, zip) => check(zip ? gzipSync(data) : Buffer.from(data))),
    {numRuns: 100},
  )
  t.pass()
})
