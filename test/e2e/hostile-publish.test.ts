// Issue 26, the hostile campaign: publishers killed with SIGKILL at random moments, and two
// publishers at once. Whatever the moment, the index names only archives that are there
// (with the size and sha256 it says), no tag a publisher reported published is ever lost,
// and a killed publisher leaves nothing a later one does not clear.
import {createHash} from 'node:crypto'
import {existsSync} from 'node:fs'
import {readFile, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {cli, startCli} from '../helpers/cli.js'
import {keyPair} from '../helpers/repository.js'
import {tempDir, writeTree} from '../helpers/temp.js'
import {parseRepositoryIndex} from '../../src/lib/repository/repository-index.js'
import {loadTrustedKeys, verifyIndexSignature} from '../../src/lib/archive/signature.js'

const TAGS = Array.from({length: 16}, (_, i) => `1.${i}.0`)
const RUNS = 32

/** Every file under the repository, hidden ones included (debris), relative to it. */
async function files(repo: string): Promise<string[]> {
  const entries = await readdir(repo, {recursive: true, withFileTypes: true})
  return entries.filter((entry) => !entry.isDirectory()).map((entry) => join(entry.parentPath, entry.name).slice(repo.length + 1)).sort()
}

/** SIGKILL `delay` ms after the start, or after `file` appears (polled every millisecond). */
function killAfter(child: ReturnType<typeof startCli>, file: string | null, delay: number): void {
  if (file === null) return void setTimeout(() => child.kill('SIGKILL'), delay)
  const poll = setInterval(() => {
    if (child.exitCode !== null || child.signalCode !== null) return clearInterval(poll)
    if (!existsSync(file)) return
    clearInterval(poll)
    setTimeout(() => child.kill('SIGKILL'), delay)
  }, 1)
}

test(`publish killed with SIGKILL at ${RUNS} random moments, some with a second publisher at once: the index never names a missing archive, nothing published is lost, no debris stays`, async (t) => {
  t.timeout(5 * 60_000)
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  const {key, pub} = await keyPair(dir, 'release')
  await writeTree(modules, Object.fromEntries(TAGS.map((tag) => [`bar/tags/${tag}/bar/manifests/init.pp`, `class bar { notify { "${tag}": } }\n`])))
  const archives: string[] = []
  for (let i = 0; i < TAGS.length; i += 4) {
    const batch = TAGS.slice(i, i + 4).map(async (tag) => {
      const archive = join(dir, `bar-${tag}.tar.gz`)
      const packed = await cli(['pack', `bar/tags/${tag}`, '--module-dir', modules, '-o', archive])
      t.is(packed.exitCode, 0, packed.stderr)
      return archive
    })
    archives.push(...(await Promise.all(batch)))
  }

  const repo = join(dir, 'repo')
  const trusted = await loadTrustedKeys([pub], null)
  // How long a publish takes here, so the kills land anywhere in it.
  const started = Date.now()
  t.is((await cli(['publish', archives[0], '--repo', repo, '--sign', key])).exitCode, 0)
  const span = Date.now() - started
  const published = new Set<string>([TAGS[0]])
  let lastVersion = 1
  let mismatches = 0
  let killed = 0

  const check = async (when: string) => {
    const bytes = await readFile(join(repo, 'index.json'))
    const index = parseRepositoryIndex(bytes, when)
    t.true(index.version! >= lastVersion, `${when}: the version never goes back`)
    lastVersion = index.version!
    for (const [tag, entry] of Object.entries(index.apps.bar?.tags ?? {})) {
      const archive = await readFile(join(repo, entry.archive)).catch(() => null)
      t.truthy(archive, `${when}: the index names ${entry.archive}, which is there`)
      if (archive) t.is(createHash('sha256').update(archive).digest('hex'), entry.sha256, `${when}: ${tag}'s archive is whole`)
    }

    for (const tag of published) t.truthy(index.apps.bar?.tags[tag], `${when}: ${tag}, reported published, is still there`)
    try {
      verifyIndexSignature(bytes, await readFile(join(repo, 'index.json.sig')), trusted, when)
    } catch {
      // Killed between the two renames: the next publish must repair it (checked at the end).
      mismatches++
    }
  }

  for (let run = 0; run < RUNS; run++) {
    const tag = TAGS[run % TAGS.length]
    const archive = archives[run % TAGS.length]
    const victim = startCli(['publish', archive, '--repo', repo, '--sign', key])
    // Every fourth run, a second publisher of the next tag at once, let finish: it must wait out or take over the victim's lock.
    const other = run % 4 === 3 ? {tag: TAGS[(run + 1) % TAGS.length], run: startCli(['publish', archives[(run + 1) % TAGS.length], '--repo', repo, '--sign', key])} : null
    // Half the kills anywhere in the publish; half in its writing phase (a few ms once it holds the lock), where it matters.
    const delay = run % 2 === 0 ? Math.random() * span * 1.2 : Math.random() * 30
    const at = run % 2 === 0 ? 'started' : 'took the lock'
    killAfter(victim, run % 2 === 0 ? null : join(repo, '.localpuppet-publish.lock'), delay)
    const result = await victim
    if (result.signal === 'SIGKILL') killed++
    else {
      t.is(result.exitCode, 0, String(result.stderr))
      published.add(tag)
    }

    if (other) {
      const done = await other.run
      t.is(done.exitCode, 0, `the second publisher (run ${run}): ${String(done.stderr)}`)
      published.add(other.tag)
    }

    await check(`run ${run} (killed ${Math.round(delay)} ms after it ${at})`)
  }

  t.log(`${killed} of ${RUNS} publishers killed; ${mismatches} times the signature was left over another index`)
  t.true(killed >= RUNS / 4, `enough kills landed (${killed})`)
  // A publish after all that: every tag, a signature that verifies, and no debris of the dead.
  const last = await cli(['publish', ...archives, '--repo', repo, '--sign', key])
  t.is(last.exitCode, 0, last.stderr)
  await check('the last publish')
  verifyIndexSignature(await readFile(join(repo, 'index.json')), await readFile(join(repo, 'index.json.sig')), trusted, 'after the last publish')
  // Objects (named by their content) may stay from a publisher killed before its index: harmless, and no debris.
  const objects = (await files(repo)).filter((path) => /^objects\/[0-9a-f]{2}\/[0-9a-f]{64}\.gz$/.test(path))
  t.deepEqual(await files(repo), ['index.json', 'index.json.sig', ...TAGS.map((tag) => `archives/bar/bar-${tag}.tar.gz`), ...objects].sort(), 'no temp file, lock or takeover marker left')
})
