import {chmod, mkdir, readFile, stat, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import fc from 'fast-check'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {
  type AcceptedVersions,
  acceptIndex,
  acceptedVersionsPath,
  judgeIndex,
  parseAcceptedVersions,
  rememberIndex,
  repositoryKey,
} from '../../../src/lib/repository/accepted-versions.js'
import {tempDir} from '../../helpers/temp.js'

const SOURCE = 'https://releases.example.com/puppet/'
const KEY = `sha256:${'a'.repeat(64)}`
const OTHER_KEY = `sha256:${'b'.repeat(64)}`
const NOW = Date.parse('2026-11-25T12:00:00.000Z')
const LATER = '2026-12-25T12:00:00.000Z'
const empty = (): AcceptedVersions => ({format: 1, repositories: {}})
const remembered = (version: number | null, key = KEY, source = SOURCE): AcceptedVersions => ({
  format: 1,
  repositories: {[source]: {[key]: {version, expires: version === null ? null : LATER, acceptedAt: '2026-11-01T00:00:00.000Z'}}},
})

function refusal(t: any, fn: () => unknown): string {
  const error = t.throws(fn) as LocalpuppetError
  t.is(error.exitCode, 65)
  return error.message
}

test('an older version than one accepted from the repository under that key is a replay (65) naming both versions', (t) => {
  const message = refusal(t, () => judgeIndex(remembered(5), SOURCE, KEY, {version: 3, expires: LATER}, NOW))
  t.is(message, `index version 3 of ${SOURCE} is older than version 5 already accepted from it: a replay (rollback attack)?`)
})

test('the same version is fine (a warm fetch); a newer one too', (t) => {
  t.deepEqual(judgeIndex(remembered(5), SOURCE, KEY, {version: 5, expires: LATER}, NOW), {version: 5, expires: LATER, warning: null})
  t.deepEqual(judgeIndex(remembered(5), SOURCE, KEY, {version: 6, expires: LATER}, NOW), {version: 6, expires: LATER, warning: null})
})

test('versions are remembered per repository and per key: another source or another key starts afresh', (t) => {
  t.is(judgeIndex(remembered(5), 'https://mirror.example.com/puppet/', KEY, {version: 1, expires: LATER}, NOW).version, 1)
  t.is(judgeIndex(remembered(5), SOURCE, OTHER_KEY, {version: 1, expires: LATER}, NOW).version, 1)
  t.is(judgeIndex(remembered(5, 'unsigned'), SOURCE, null, {version: 6, expires: LATER}, NOW).version, 6)
  t.is(judgeIndex(remembered(5, 'unsigned'), SOURCE, KEY, {version: 1, expires: LATER}, NOW).version, 1)
  refusal(t, () => judgeIndex(remembered(5, 'unsigned'), SOURCE, null, {version: 3, expires: LATER}, NOW))
})

test('an expired index is refused (65) naming the date, even at a version already accepted', (t) => {
  const expires = '2026-11-25T11:59:59.000Z'
  const message = refusal(t, () => judgeIndex(remembered(5), SOURCE, KEY, {version: 5, expires}, NOW))
  t.regex(message, new RegExp(`^index version 5 of ${SOURCE} expired at ${expires}: `))
  refusal(t, () => judgeIndex(empty(), SOURCE, KEY, {version: 1, expires: new Date(NOW).toISOString()}, NOW))
})

test('an index without a version: accepted with a warning while nothing came from the repository, quietly after that, refused (65) once a versioned one was accepted', (t) => {
  const first = judgeIndex(empty(), SOURCE, KEY, {}, NOW)
  t.deepEqual({...first, warning: null}, {version: null, expires: null, warning: null})
  t.regex(first.warning!, /^index of https:\/\/releases\.example\.com\/puppet\/ has no version or expiry \(published by an older localpuppet\)/)
  const memory = rememberIndex(empty(), SOURCE, KEY, first, NOW)
  t.deepEqual(judgeIndex(memory, SOURCE, KEY, {}, NOW), {version: null, expires: null, warning: null})
  const message = refusal(t, () => judgeIndex(remembered(2), SOURCE, KEY, {}, NOW))
  t.regex(message, /has no version \(made by an older localpuppet\), but version 2 was already accepted from it: a replay \(rollback attack\)\?$/)
  // Under another key too: the repository moved on to versions.
  refusal(t, () => judgeIndex(remembered(2), SOURCE, OTHER_KEY, {}, NOW))
})

test('remembering never lowers a version', (t) => {
  fc.assert(
    fc.property(fc.array(fc.option(fc.integer({min: 1, max: 50}), {nil: null}), {maxLength: 20}), (versions) => {
      let memory = empty()
      let highest = 0
      for (const version of versions) {
        memory = rememberIndex(memory, SOURCE, KEY, {version, expires: version === null ? null : LATER, warning: null}, NOW)
        highest = Math.max(highest, version ?? 0)
        const kept = memory.repositories[SOURCE]?.[KEY]?.version ?? 0
        if (kept !== highest) return false
      }

      return true
    }),
  )
  t.pass()
})

test('a repository is remembered by its normalised source, without credentials', (t) => {
  t.is(repositoryKey('https://user:secret@releases.example.com/puppet/'), 'https://releases.example.com/puppet/')
  t.is(repositoryKey('/srv/repo'), '/srv/repo')
  t.is(judgeIndex(remembered(5), 'https://u:p@releases.example.com/puppet/', KEY, {version: 5, expires: LATER}, NOW).version, 5)
  refusal(t, () => judgeIndex(remembered(5), 'https://u:p@releases.example.com/puppet/', KEY, {version: 4, expires: LATER}, NOW))
})

test('acceptIndex writes repositories.json (0644) in the module dir\'s .localpuppet and refuses an older version on the next call', async (t) => {
  const modules = await tempDir(t)
  const accepted = await acceptIndex(modules, SOURCE, KEY, {version: 4, expires: LATER}, {now: NOW})
  t.deepEqual(accepted, {version: 4, expires: LATER, warning: null, untrusted: []})
  const path = acceptedVersionsPath(modules)
  t.is(path, join(modules, '.localpuppet', 'repositories.json'))
  t.is((await stat(path)).mode & 0o777, 0o644)
  t.like(JSON.parse(await readFile(path, 'utf8')), {format: 1, repositories: {[SOURCE]: {[KEY]: {version: 4, expires: LATER}}}})
  const error = await t.throwsAsync(acceptIndex(modules, SOURCE, KEY, {version: 3, expires: LATER}, {now: NOW}))
  t.is((error as LocalpuppetError).exitCode, 65)
  t.like(JSON.parse(await readFile(path, 'utf8')), {repositories: {[SOURCE]: {[KEY]: {version: 4}}}})
})

test('acceptIndex at the same time from many fetches: the highest version is what stays', async (t) => {
  const modules = await tempDir(t)
  await Promise.all([3, 9, 1, 7, 5, 2, 8].map((version) => acceptIndex(modules, SOURCE, KEY, {version, expires: LATER}, {now: NOW}).catch(() => null)))
  t.is(JSON.parse(await readFile(acceptedVersionsPath(modules), 'utf8')).repositories[SOURCE][KEY].version, 9)
})

test('repositories.json others can write is not believed (77; --allow-untrusted reports it); a link or damaged file is 65', async (t) => {
  const modules = await tempDir(t)
  await acceptIndex(modules, SOURCE, KEY, {version: 4, expires: LATER}, {now: NOW})
  const path = acceptedVersionsPath(modules)
  await chmod(path, 0o666)
  const error = await t.throwsAsync(acceptIndex(modules, SOURCE, KEY, {version: 4, expires: LATER}, {now: NOW}))
  t.is((error as LocalpuppetError).exitCode, 77)
  t.regex(error!.message, /^accepted repository versions .*repositories\.json is not trusted: writable by group and others/)
  const allowed = await acceptIndex(modules, SOURCE, KEY, {version: 4, expires: LATER}, {now: NOW, allowUntrusted: true})
  t.is(allowed.untrusted.length, 1)

  const other = await tempDir(t)
  await mkdir(join(other, '.localpuppet'))
  await writeFile(join(other, 'elsewhere.json'), JSON.stringify(empty()))
  await symlink(join(other, 'elsewhere.json'), acceptedVersionsPath(other))
  t.is((await t.throwsAsync(acceptIndex(other, SOURCE, KEY, {version: 1, expires: LATER}, {now: NOW})) as LocalpuppetError).exitCode, 65)

  for (const text of ['{', '[]', '{"format":1,"repositories":{"x":{"k":{"version":0,"expires":null}}}}', '{"format":2,"repositories":{}}']) {
    const damaged = t.throws(() => parseAcceptedVersions(text, '/m/.localpuppet/repositories.json')) as LocalpuppetError
    t.is(damaged.exitCode, 65)
    t.regex(damaged.message, /^\/m\/\.localpuppet\/repositories\.json is damaged: /)
  }
})

test('acceptIndex never makes a module directory that is not there (66)', async (t) => {
  const dir = await tempDir(t)
  const missing = join(dir, 'missing', 'modules')
  const error = await t.throwsAsync(acceptIndex(missing, SOURCE, KEY, {version: 1, expires: LATER}, {now: NOW}))
  t.is((error as LocalpuppetError).exitCode, 66)
  t.regex(error!.message, /^module directory .*missing\/modules: not found$/)
  t.false(await stat(join(dir, 'missing')).then(() => true, () => false))
})
