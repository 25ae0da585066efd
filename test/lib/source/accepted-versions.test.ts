import {chmod, mkdir, readFile, stat, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import fc from 'fast-check'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {
  type AcceptedVersions,
  IndexExpiredError,
  acceptIndex,
  acceptedVersionsPath,
  judgeIndex,
  parseAcceptedVersions,
  rememberIndex,
  repositoryKey,
} from '../../../src/lib/source/accepted-versions.js'
import {tempDir} from '../../helpers/temp.js'

const SOURCE = 'https://releases.example.com/puppet/'
const ID = 'a'.repeat(32)
const OTHER_ID = 'b'.repeat(32)
const NOW = Date.parse('2026-11-25T12:00:00.000Z')
const LATER = '2026-12-25T12:00:00.000Z'
const empty = (): AcceptedVersions => ({format: 2, repositories: {}})
const remembered = (version: number | null, repository: string | null = ID, source = SOURCE): AcceptedVersions => ({
  format: 2,
  repositories: {[source]: {repository, version, expires: version === null ? null : LATER, acceptedAt: '2026-11-01T00:00:00.000Z'}},
})

function refusal(t: any, fn: () => unknown): string {
  const error = t.throws(fn) as LocalpuppetError
  t.is(error.exitCode, 65)
  return error.message
}

test('an older version than one accepted from the repository is a replay (65) naming both versions', (t) => {
  const message = refusal(t, () => judgeIndex(remembered(5), SOURCE, {repository: ID, version: 3, expires: LATER}, NOW))
  t.is(message, `index version 3 of ${SOURCE} is older than version 5 already accepted from it: a replay (rollback attack)?`)
})

test('the same version is fine (a warm fetch); a newer one too', (t) => {
  t.deepEqual(judgeIndex(remembered(5), SOURCE, {repository: ID, version: 5, expires: LATER}, NOW), {repository: ID, version: 5, expires: LATER, warning: null})
  t.deepEqual(judgeIndex(remembered(5), SOURCE, {repository: ID, version: 6, expires: LATER}, NOW), {repository: ID, version: 6, expires: LATER, warning: null})
})

test('versions are remembered per repository, whatever key signed them: another source starts afresh, a rotated key does not', (t) => {
  t.is(judgeIndex(remembered(5), 'https://mirror.example.com/puppet/', {repository: ID, version: 1, expires: LATER}, NOW).version, 1)
  // An index signed by the retired key (still trusted) at a version below what the new key's index reached: a replay all the same.
  t.regex(refusal(t, () => judgeIndex(remembered(5), SOURCE, {repository: ID, version: 4, expires: LATER}, NOW)), /older than version 5/)
})

test('another repository at the same source (its index signed with the same key) is refused (65) naming both ids and the fix, whatever its version', (t) => {
  for (const version of [1, 5, 99]) {
    const message = refusal(t, () => judgeIndex(remembered(5), SOURCE, {repository: OTHER_ID, version, expires: LATER}, NOW))
    t.is(
      message,
      `index of ${SOURCE} is of repository ${OTHER_ID}, not ${ID}, which this node accepted from it: another repository's index in its place (one signed with the same key)? ` +
        `If ${SOURCE} was re-created on purpose, accept its new id once, as the publisher's side gives it: localpuppet fetch APP --source ${SOURCE} --accept-repository ID (or set repository_id to it)`,
    )
  }

  // Once an id is pinned, an index without one is refused too.
  t.regex(refusal(t, () => judgeIndex(remembered(5), SOURCE, {version: 6, expires: LATER}, NOW)), new RegExp(`^index of ${SOURCE} has no repository id, not ${ID}, which this node accepted from it: .*publish with this one\\.$`))
  t.regex(refusal(t, () => judgeIndex(remembered(null), SOURCE, {}, NOW)), /has no repository id/)
})

test('an id is pinned on first acceptance; an index without one (an older publisher) is accepted until then', (t) => {
  t.deepEqual(judgeIndex(empty(), SOURCE, {version: 1, expires: LATER}, NOW), {repository: null, version: 1, expires: LATER, warning: null})
  t.is(judgeIndex(remembered(5, null), SOURCE, {version: 6, expires: LATER}, NOW).repository, null)
  // The publisher upgrades: its next index has an id, which is pinned from then on (versions still only grow).
  const upgraded = judgeIndex(remembered(5, null), SOURCE, {repository: ID, version: 6, expires: LATER}, NOW)
  const memory = rememberIndex(remembered(5, null), SOURCE, upgraded, NOW)
  t.like(memory.repositories[SOURCE], {repository: ID, version: 6})
  refusal(t, () => judgeIndex(memory, SOURCE, {repository: OTHER_ID, version: 7, expires: LATER}, NOW))
  refusal(t, () => judgeIndex(remembered(5, null), SOURCE, {repository: ID, version: 4, expires: LATER}, NOW))
})

test('--accept-repository: the named repository replaces the pinned one and starts its versions afresh; any other index is still refused', (t) => {
  const accepted = judgeIndex(remembered(5), SOURCE, {repository: OTHER_ID, version: 1, expires: LATER}, NOW, OTHER_ID)
  t.deepEqual(accepted, {repository: OTHER_ID, version: 1, expires: LATER, warning: null})
  const memory = rememberIndex(remembered(5), SOURCE, accepted, NOW)
  t.like(memory.repositories[SOURCE], {repository: OTHER_ID, version: 1})
  // The old repository's index is now the stranger.
  t.regex(refusal(t, () => judgeIndex(memory, SOURCE, {repository: ID, version: 5, expires: LATER}, NOW)), new RegExp(`is of repository ${ID}, not ${OTHER_ID}`))
  // Naming the pinned id changes nothing: versions still only grow.
  refusal(t, () => judgeIndex(remembered(5), SOURCE, {repository: ID, version: 4, expires: LATER}, NOW, ID))
  // Naming an id the index does not have is refused, whatever the index.
  t.is(refusal(t, () => judgeIndex(remembered(5), SOURCE, {repository: ID, version: 6, expires: LATER}, NOW, OTHER_ID)), `index of ${SOURCE} is of repository ${ID}, not ${OTHER_ID} as --accept-repository says; refused`)
  refusal(t, () => judgeIndex(empty(), SOURCE, {version: 6, expires: LATER}, NOW, OTHER_ID))
  // Expiry still holds.
  refusal(t, () => judgeIndex(remembered(5), SOURCE, {repository: OTHER_ID, version: 1, expires: '2026-11-01T00:00:00.000Z'}, NOW, OTHER_ID))
})

test('repository_id: an index of another id is refused (65) on first contact too, its hints naming no id but the expected one; a matching index is pinned, and replaces a pinned one (a repository re-created, the setting changed)', (t) => {
  const expected = {id: ID, from: 'repository_id in /etc/localpuppet/config.yaml:3'}
  for (const memory of [empty(), remembered(5, OTHER_ID)]) {
    const error = t.throws(() => judgeIndex(memory, SOURCE, {repository: OTHER_ID, version: 1, expires: LATER}, NOW, undefined, expected)) as LocalpuppetError
    t.is(error.exitCode, 65)
    t.is(error.message, `index of ${SOURCE} is of repository ${OTHER_ID}, not ${ID} as repository_id in /etc/localpuppet/config.yaml:3 says; refused: another repository's index in its place (one signed with the same key), or the repository was re-created`)
    t.false(error.suggestions.join('\n').includes(OTHER_ID), 'no hint names the id the refused index carries')
  }

  refusal(t, () => judgeIndex(empty(), SOURCE, {version: 1, expires: LATER}, NOW, undefined, expected))
  t.like(judgeIndex(empty(), SOURCE, {repository: ID, version: 1, expires: LATER}, NOW, undefined, expected), {repository: ID, version: 1})
  // Pinned OTHER_ID at version 5; the setting now names ID (re-created): accepted at version 1, pinned from then on.
  const accepted = judgeIndex(remembered(5, OTHER_ID), SOURCE, {repository: ID, version: 1, expires: LATER}, NOW, undefined, expected)
  t.like(rememberIndex(remembered(5, OTHER_ID), SOURCE, accepted, NOW, {}, ID).repositories[SOURCE], {repository: ID, version: 1})
  // Versions still only grow under the expected id.
  refusal(t, () => judgeIndex(remembered(5), SOURCE, {repository: ID, version: 4, expires: LATER}, NOW, undefined, expected))
})

test('--accept-repository where no id is pinned yet (versions from a publisher older than ids): the named repository starts afresh, and later fetches without the flag keep taking it', async (t) => {
  // What an older publisher's indexes left: version 5, no id. The repository is re-created (id OTHER_ID, version 1) and accepted on purpose.
  const before = remembered(5, null)
  const accepted = judgeIndex(before, SOURCE, {repository: OTHER_ID, version: 1, expires: LATER}, NOW, OTHER_ID)
  const memory = rememberIndex(before, SOURCE, accepted, NOW, {}, OTHER_ID)
  t.like(memory.repositories[SOURCE], {repository: OTHER_ID, version: 1})
  t.is(judgeIndex(memory, SOURCE, {repository: OTHER_ID, version: 1, expires: LATER}, NOW).version, 1)

  // The same through acceptIndex, as fetch --accept-repository and the next timer run call it.
  const modules = await tempDir(t)
  await acceptIndex(modules, SOURCE, {version: 5, expires: LATER}, {now: NOW})
  await acceptIndex(modules, SOURCE, {repository: OTHER_ID, version: 1, expires: LATER}, {now: NOW, acceptRepository: OTHER_ID})
  t.like((await acceptIndex(modules, SOURCE, {repository: OTHER_ID, version: 2, expires: LATER}, {now: NOW})), {repository: OTHER_ID, version: 2})
  t.like(JSON.parse(await readFile(acceptedVersionsPath(modules), 'utf8')).repositories[SOURCE], {repository: OTHER_ID, version: 2})
  // Versions only grow from there.
  refusal(t, () => judgeIndex(rememberIndex(memory, SOURCE, {repository: OTHER_ID, version: 3, expires: LATER, warning: null}, NOW), SOURCE, {repository: OTHER_ID, version: 2, expires: LATER}, NOW))
})

test('an expired index is refused (65) naming the date, even at a version already accepted', (t) => {
  const expires = '2026-11-25T11:59:59.000Z'
  const message = refusal(t, () => judgeIndex(remembered(5), SOURCE, {repository: ID, version: 5, expires}, NOW))
  t.regex(message, new RegExp(`^index version 5 of ${SOURCE} expired at ${expires}: `))
  refusal(t, () => judgeIndex(empty(), SOURCE, {repository: ID, version: 1, expires: new Date(NOW).toISOString()}, NOW))
})

test('an index without a version: accepted with a warning while nothing came from the repository, quietly after that, refused (65) once a versioned one was accepted', (t) => {
  const first = judgeIndex(empty(), SOURCE, {}, NOW)
  t.deepEqual({...first, warning: null}, {repository: null, version: null, expires: null, warning: null})
  t.regex(first.warning!, /^index of https:\/\/releases\.example\.com\/puppet\/ has no version or expiry \(published by an older localpuppet\)/)
  const memory = rememberIndex(empty(), SOURCE, first, NOW)
  t.deepEqual(judgeIndex(memory, SOURCE, {}, NOW), {repository: null, version: null, expires: null, warning: null})
  const message = refusal(t, () => judgeIndex(remembered(2, null), SOURCE, {}, NOW))
  t.regex(message, /has no version \(made by an older localpuppet\), but version 2 was already accepted from it: a replay \(rollback attack\)\?$/)
})

test('remembering never lowers a version nor unpins an id', (t) => {
  fc.assert(
    fc.property(fc.array(fc.option(fc.integer({min: 1, max: 50}), {nil: null}), {maxLength: 20}), (versions) => {
      let memory = empty()
      let highest = 0
      for (const [i, version] of versions.entries()) {
        const repository = i === 0 ? null : ID
        memory = rememberIndex(memory, SOURCE, {repository, version, expires: version === null ? null : LATER, warning: null}, NOW)
        highest = Math.max(highest, version ?? 0)
        const kept = memory.repositories[SOURCE]
        if ((kept.version ?? 0) !== highest || kept.repository !== repository) return false
      }

      return true
    }),
  )
  t.pass()
})

test('a repository is remembered by its normalised source, without credentials', (t) => {
  t.is(repositoryKey('https://user:secret@releases.example.com/puppet/'), 'https://releases.example.com/puppet/')
  t.is(repositoryKey('/srv/repo'), '/srv/repo')
  t.is(judgeIndex(remembered(5), 'https://u:p@releases.example.com/puppet/', {repository: ID, version: 5, expires: LATER}, NOW).version, 5)
  refusal(t, () => judgeIndex(remembered(5), 'https://u:p@releases.example.com/puppet/', {repository: ID, version: 4, expires: LATER}, NOW))
})

test('format 1 (versions per key, before ids) is read as format 2: per source the highest version, no id pinned', (t) => {
  const entry = (version: number | null) => ({version, expires: version === null ? null : LATER, acceptedAt: '2026-11-01T00:00:00.000Z'})
  const memory = parseAcceptedVersions(JSON.stringify({format: 1, repositories: {[SOURCE]: {[`sha256:${'a'.repeat(64)}`]: entry(3), unsigned: entry(7), other: entry(null)}, '/srv/old': {}}}), '/m/r.json')
  t.deepEqual(memory, {format: 2, repositories: {[SOURCE]: {repository: null, ...entry(7)}}})
  refusal(t, () => judgeIndex(memory, SOURCE, {repository: ID, version: 6, expires: LATER}, NOW))
})

test('acceptIndex writes repositories.json (0644) in the module dir\'s .localpuppet and refuses an older version on the next call', async (t) => {
  const modules = await tempDir(t)
  const accepted = await acceptIndex(modules, SOURCE, {repository: ID, version: 4, expires: LATER}, {now: NOW})
  t.deepEqual(accepted, {repository: ID, version: 4, expires: LATER, warning: null, untrusted: []})
  const path = acceptedVersionsPath(modules)
  t.is(path, join(modules, '.localpuppet', 'repositories.json'))
  t.is((await stat(path)).mode & 0o777, 0o644)
  t.like(JSON.parse(await readFile(path, 'utf8')), {format: 2, repositories: {[SOURCE]: {repository: ID, version: 4, expires: LATER}}})
  const error = await t.throwsAsync(acceptIndex(modules, SOURCE, {repository: ID, version: 3, expires: LATER}, {now: NOW}))
  t.is((error as LocalpuppetError).exitCode, 65)
  t.like(JSON.parse(await readFile(path, 'utf8')), {repositories: {[SOURCE]: {version: 4}}})
})

test('acceptIndex at the same time from many fetches: the highest version is what stays', async (t) => {
  const modules = await tempDir(t)
  await Promise.all([3, 9, 1, 7, 5, 2, 8].map((version) => acceptIndex(modules, SOURCE, {repository: ID, version, expires: LATER}, {now: NOW}).catch(() => null)))
  t.is(JSON.parse(await readFile(acceptedVersionsPath(modules), 'utf8')).repositories[SOURCE].version, 9)
})

test('repositories.json others can write is not believed (77; --allow-untrusted reports it); a link or damaged file is 65', async (t) => {
  const modules = await tempDir(t)
  await acceptIndex(modules, SOURCE, {repository: ID, version: 4, expires: LATER}, {now: NOW})
  const path = acceptedVersionsPath(modules)
  await chmod(path, 0o666)
  const error = await t.throwsAsync(acceptIndex(modules, SOURCE, {repository: ID, version: 4, expires: LATER}, {now: NOW}))
  t.is((error as LocalpuppetError).exitCode, 77)
  t.regex(error!.message, /^accepted repository versions .*repositories\.json is not trusted: writable by group and others/)
  const allowed = await acceptIndex(modules, SOURCE, {repository: ID, version: 4, expires: LATER}, {now: NOW, allowUntrusted: true})
  t.is(allowed.untrusted.length, 1)

  const other = await tempDir(t)
  await mkdir(join(other, '.localpuppet'))
  await writeFile(join(other, 'elsewhere.json'), JSON.stringify(empty()))
  await symlink(join(other, 'elsewhere.json'), acceptedVersionsPath(other))
  t.is((await t.throwsAsync(acceptIndex(other, SOURCE, {repository: ID, version: 1, expires: LATER}, {now: NOW})) as LocalpuppetError).exitCode, 65)

  for (const text of ['{', '[]', '{"format":1,"repositories":{"x":{"k":{"version":0,"expires":null}}}}', '{"format":2,"repositories":{"x":{"repository":"nothex","version":1,"expires":null,"acceptedAt":"x"}}}', '{"format":3,"repositories":{}}']) {
    const damaged = t.throws(() => parseAcceptedVersions(text, '/m/.localpuppet/repositories.json')) as LocalpuppetError
    t.is(damaged.exitCode, 65)
    t.regex(damaged.message, /^\/m\/\.localpuppet\/repositories\.json is damaged: /)
  }
})

test('acceptIndex never makes a module directory that is not there (66)', async (t) => {
  const dir = await tempDir(t)
  const missing = join(dir, 'missing', 'modules')
  const error = await t.throwsAsync(acceptIndex(missing, SOURCE, {repository: ID, version: 1, expires: LATER}, {now: NOW}))
  t.is((error as LocalpuppetError).exitCode, 66)
  t.regex(error!.message, /^module directory .*missing\/modules: not found$/)
  t.false(await stat(join(dir, 'missing')).then(() => true, () => false))
})

test('issue 35: an index within a week of its expiry is accepted with a warning; an expired one is refused as IndexExpiredError (65) with its date', (t) => {
  const soon = new Date(NOW + 86_400_000).toISOString()
  const judged = judgeIndex(remembered(5), SOURCE, {repository: ID, version: 6, expires: soon}, NOW)
  t.is(judged.version, 6)
  t.is(judged.warning, `index version 6 of ${SOURCE} expires at ${soon}, in 1d: then nodes take nothing new from it; re-sign it (localpuppet publish --repo DIR --sign KEY.pem, with no archive) and check the timer that should have`)
  t.is(judgeIndex(remembered(5), SOURCE, {repository: ID, version: 6, expires: new Date(NOW + 8 * 86_400_000).toISOString()}, NOW).warning, null)
  const error = t.throws(() => judgeIndex(remembered(5), SOURCE, {repository: ID, version: 6, expires: '2026-11-01T00:00:00.000Z'}, NOW), {instanceOf: IndexExpiredError})
  t.is(error?.exitCode, 65)
  t.is(error?.expires, '2026-11-01T00:00:00.000Z')
  // A replay stays a replay: older than accepted is refused as such, expired or not.
  t.false(t.throws(() => judgeIndex(remembered(5), SOURCE, {repository: ID, version: 4, expires: '2026-11-01T00:00:00.000Z'}, NOW)) instanceof IndexExpiredError)
})
