import test from 'ava'
import fc from 'fast-check'
import semver from 'semver'

import {LocalpuppetError, ReleaseError} from '../../../src/lib/errors.js'
import {
  type ReleaseRef,
  isSemverTag,
  isValidVersionName,
  maxSatisfyingTag,
  parseReleaseRef,
  releasePath,
  sortTagsNewestFirst,
} from '../../../src/lib/release/release-ref.js'

/** Runs fn and returns the LocalpuppetError it throws; fails the test otherwise. */
function refusal(fn: () => unknown): LocalpuppetError {
  try {
    fn()
  } catch (error) {
    if (error instanceof LocalpuppetError) return error
    throw error
  }

  throw new Error('expected a LocalpuppetError, nothing was thrown')
}

// --- the reference forms -------------------------------------------------------------

test('foo/trunk is the mutable trunk of app foo', (t) => {
  t.deepEqual(parseReleaseRef('foo/trunk'), {kind: 'trunk', app: 'foo', text: 'foo/trunk'})
})

test('foo/branches/NAME is a branch', (t) => {
  t.deepEqual(parseReleaseRef('foo/branches/feature-x'), {kind: 'branch', app: 'foo', branch: 'feature-x', text: 'foo/branches/feature-x'})
})

test('foo/tags/TAG is a tag', (t) => {
  t.deepEqual(parseReleaseRef('foo/tags/1.2.0'), {kind: 'tag', app: 'foo', tag: '1.2.0', text: 'foo/tags/1.2.0'})
})

test('a leading app/ before a full reference means the reference without it', (t) => {
  t.deepEqual(parseReleaseRef('app/foo/trunk'), {kind: 'trunk', app: 'foo', text: 'app/foo/trunk'})
  t.deepEqual(parseReleaseRef('app/foo/tags/1.4.0'), {kind: 'tag', app: 'foo', tag: '1.4.0', text: 'app/foo/tags/1.4.0'})
  t.deepEqual(parseReleaseRef('app/foo/branches/x'), {kind: 'branch', app: 'foo', branch: 'x', text: 'app/foo/branches/x'})
})

test('an app really called app keeps its plain meaning', (t) => {
  t.deepEqual(parseReleaseRef('app/trunk'), {kind: 'trunk', app: 'app', text: 'app/trunk'})
  t.deepEqual(parseReleaseRef('app/tags/1.0.0'), {kind: 'tag', app: 'app', tag: '1.0.0', text: 'app/tags/1.0.0'})
  // Complete as written, so not read as the prefixed form of `tags/trunk` or refused.
  t.deepEqual(parseReleaseRef('app/tags/trunk'), {kind: 'tag', app: 'app', tag: 'trunk', text: 'app/tags/trunk'})
  t.deepEqual(parseReleaseRef('app/branches/tags'), {kind: 'branch', app: 'app', branch: 'tags', text: 'app/branches/tags'})
  t.deepEqual(parseReleaseRef('app/app/trunk'), {kind: 'trunk', app: 'app', text: 'app/app/trunk'})
})

test('foo@RANGE is a semver range', (t) => {
  t.deepEqual(parseReleaseRef('foo@^1.2'), {kind: 'range', app: 'foo', range: '^1.2', text: 'foo@^1.2'})
  t.deepEqual(parseReleaseRef('foo@>=1.2.0 <2'), {kind: 'range', app: 'foo', range: '>=1.2.0 <2', text: 'foo@>=1.2.0 <2'})
  t.deepEqual(parseReleaseRef('foo@~1.4.0 || 2.x'), {kind: 'range', app: 'foo', range: '~1.4.0 || 2.x', text: 'foo@~1.4.0 || 2.x'})
})

test('foo@TAG accepts an exact tag that is not semver', (t) => {
  t.deepEqual(parseReleaseRef('foo@r1'), {kind: 'range', app: 'foo', range: 'r1', text: 'foo@r1'})
  t.deepEqual(parseReleaseRef('foo@release_2024-01'), {kind: 'range', app: 'foo', range: 'release_2024-01', text: 'foo@release_2024-01'})
})

test('surrounding whitespace is ignored', (t) => {
  t.deepEqual(parseReleaseRef('  foo/trunk\n'), {kind: 'trunk', app: 'foo', text: 'foo/trunk'})
  t.deepEqual(parseReleaseRef('foo@ ^1.2 '), {kind: 'range', app: 'foo', range: '^1.2', text: 'foo@ ^1.2'})
})

test('releasePath names the release directory under the module directory', (t) => {
  t.is(releasePath({app: 'foo', kind: 'trunk'}), 'foo/trunk')
  t.is(releasePath({app: 'foo', kind: 'branch', branch: 'x'}), 'foo/branches/x')
  t.is(releasePath({app: 'foo', kind: 'tag', tag: '1.2.0'}), 'foo/tags/1.2.0')
})

// --- invalid references ----------------------------------------------------------------

const invalid: Array<[string, string]> = [
  ['', 'is empty'],
  ['   ', 'is empty'],
  ['foo', 'is not a release reference'],
  ['foo/tunk', 'is not a release reference'],
  ['foo/trunk/extra', 'is not a release reference'],
  ['foo/tags', 'is not a release reference'],
  ['foo/tags/1.0.0/x', 'is not a release reference'],
  ['foo/branches/a/b', 'is not a release reference'],
  ['foo/tags/', 'has an invalid tag name ""'],
  ['foo/tags/..', 'has an invalid tag name ".."'],
  ['foo/tags/.hidden', 'has an invalid tag name ".hidden"'],
  ['foo/branches/-x', 'has an invalid branch name "-x"'],
  ['../foo/trunk', 'has an invalid app name ".."'],
  ['/foo/trunk', 'has an invalid app name ""'],
  ['Foo bar/trunk', 'has an invalid app name "Foo bar"'],
  ['foo@', 'has nothing after @'],
  ['foo@   ', 'has nothing after @'],
  ['@^1.2', 'has an invalid app name ""'],
  ['foo/tags@^1', 'has an invalid app name "foo/tags"'],
  ['foo@^1.2 ~~ nonsense', 'is neither an exact tag name nor a valid semver range after @'],
  ['foo@../x', 'is neither an exact tag name nor a valid semver range after @'],
  ['foo/\u0000trunk', 'contains control characters'],
  ['foo/branches/a\tb', 'contains control characters'],
  [`foo/tags/${'1'.repeat(300)}`, 'is too long'],
]

for (const [text, why] of invalid) {
  test(`refuses ${JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}...` : text)}: ${why}`, (t) => {
    const error = refusal(() => parseReleaseRef(text, 'input.yaml:1: app'))
    t.true(error instanceof ReleaseError)
    t.is(error.exitCode, 65)
    t.is(error.code, 'invalid-release')
    t.is(error.message, `input.yaml:1: app: ${JSON.stringify(text)} ${why}`)
    t.deepEqual(error.suggestions, ['use APP/trunk, APP/branches/NAME, APP/tags/TAG, APP@RANGE (e.g. foo@^1.2) or APP/channels/NAME'])
  })
}

test('an invalid reference is named with the default label when no location is given', (t) => {
  const error = refusal(() => parseReleaseRef('foo/tunk'))
  t.is(error.message, 'release reference: "foo/tunk" is not a release reference')
})

test('refuses values that are not strings, saying what it got', (t) => {
  const cases: Array<[unknown, string]> = [
    [null, 'nothing'],
    [undefined, 'nothing'],
    [12, 'number 12'],
    [true, 'boolean true'],
    [['foo/trunk'], 'a list'],
    [{foo: 'trunk'}, 'a mapping'],
  ]
  for (const [value, described] of cases) {
    const error = refusal(() => parseReleaseRef(value, 'x.yaml:2: modulepath[0]'))
    t.is(error.exitCode, 65)
    t.is(error.message, `x.yaml:2: modulepath[0]: expected a string such as foo/trunk, foo/tags/1.2.0 or foo@^1.2, got ${described}`)
  }
})

// --- semver tags -----------------------------------------------------------------------

test('isSemverTag accepts 1.2.3 and v1.2.3 with prerelease and build, nothing else', (t) => {
  for (const tag of ['1.2.3', 'v1.2.3', '0.0.0', '1.2.3-rc.1', 'v1.2.3-rc.1+build.5', '10.20.30+20240101']) t.true(isSemverTag(tag), tag)
  for (const tag of ['1.2', 'r1', 'V1.2.3', '=1.2.3', '01.2.3', '1.2.3.4', ' 1.2.3', 'latest', '1.0.0-01', '1.0.0-rc..1', '99999999999999999999.0.0']) {
    t.false(isSemverTag(tag), tag)
  }
})

test('isValidVersionName allows one safe path segment', (t) => {
  for (const name of ['1.2.3', 'v1.2.3+b', 'r1', 'feature_x-2']) t.true(isValidVersionName(name), name)
  for (const name of ['', '.', '..', '.x', 'a/b', 'a b', '-x']) t.false(isValidVersionName(name), name)
})

test('tags sort by semver, not as strings: 1.10.0 is newer than 1.9.0', (t) => {
  t.deepEqual(sortTagsNewestFirst(['1.9.0', '1.10.0', '1.2.0', '2.0.0', '0.99.99']), ['2.0.0', '1.10.0', '1.9.0', '1.2.0', '0.99.99'])
})

test('v-prefixed tags sort among plain ones by version', (t) => {
  t.deepEqual(sortTagsNewestFirst(['v1.9.0', '1.10.0', 'v1.11.0', '1.2.0']), ['v1.11.0', '1.10.0', 'v1.9.0', '1.2.0'])
})

test('a prerelease sorts below its release', (t) => {
  t.deepEqual(sortTagsNewestFirst(['1.3.0-rc.2', '1.3.0', '1.3.0-rc.10', '1.2.0']), ['1.3.0', '1.3.0-rc.10', '1.3.0-rc.2', '1.2.0'])
})

test('build metadata breaks ties between equal versions, then the name does', (t) => {
  t.deepEqual(sortTagsNewestFirst(['1.0.0', '1.0.0+build.2', '1.0.0+build.10']), ['1.0.0+build.10', '1.0.0+build.2', '1.0.0'])
  // Same precedence and same build: the order is still total, whatever the input order.
  t.deepEqual(sortTagsNewestFirst(['1.0.0', 'v1.0.0']), sortTagsNewestFirst(['v1.0.0', '1.0.0']))
})

test('tags that are not versions come last, by name, and semver-looking junk does not crash the sort', (t) => {
  t.deepEqual(sortTagsNewestFirst(['r2', '1.0.0', 'latest', 'r10', '1.0.0-01', '0.1.0']), ['1.0.0', '0.1.0', '1.0.0-01', 'latest', 'r10', 'r2'])
})

test('maxSatisfyingTag picks the highest tag in the range by semver', (t) => {
  const tags = ['1.2.0', '1.9.3', '1.10.0', '2.0.0', 'r1']
  t.is(maxSatisfyingTag(tags, '^1.2'), '1.10.0')
  t.is(maxSatisfyingTag(tags, '~1.9'), '1.9.3')
  t.is(maxSatisfyingTag(tags, '>=1.0.0'), '2.0.0')
  t.is(maxSatisfyingTag(tags, '^3'), undefined)
})

test('maxSatisfyingTag matches v-prefixed tags and returns the tag as named', (t) => {
  t.is(maxSatisfyingTag(['v1.2.0', 'v1.3.0', '1.2.5', 'v2.0.0'], '^1.2'), 'v1.3.0')
})

test('prereleases are chosen only when the range asks for them', (t) => {
  const tags = ['1.2.0', '1.3.0-rc.1', '2.0.0-beta.1']
  t.is(maxSatisfyingTag(tags, '^1.2'), '1.2.0')
  t.is(maxSatisfyingTag(tags, '>=1.0.0'), '1.2.0')
  t.is(maxSatisfyingTag(tags, '^1.3.0-rc.0'), '1.3.0-rc.1')
  t.is(maxSatisfyingTag(tags, '>=2.0.0-beta.0'), '2.0.0-beta.1')
  t.is(maxSatisfyingTag(['1.3.0-rc.1'], '^1'), undefined)
})

test('maxSatisfyingTag prefers the higher build among equal versions', (t) => {
  t.is(maxSatisfyingTag(['1.0.0+b.1', '1.0.0+b.3', '1.0.0+b.2'], '1.0.0'), '1.0.0+b.3')
})

test('maxSatisfyingTag ignores tags that are not versions', (t) => {
  t.is(maxSatisfyingTag(['r1', 'latest', '1.0.0-01'], '*'), undefined)
})

// --- properties --------------------------------------------------------------------------

/** Strings made of the characters references are made of, so the parser's branches are reached. */
const refLike = fc
  .array(fc.constantFrom('foo', 'app', '/', '@', 'trunk', 'tags', 'branches', '1.2.0', '^', '~', '.', '..', '-', ' ', 'v', '*', '|', '<', '>', '=', '\n', '\0', 'é'), {maxLength: 12})
  .map((parts) => parts.join(''))

test('property: parseReleaseRef throws nothing but a 65 LocalpuppetError, whatever the string', (t) => {
  fc.assert(
    fc.property(fc.oneof(fc.string({unit: 'binary', maxLength: 400}), refLike), (text) => {
      try {
        const ref = parseReleaseRef(text)
        return typeof ref.app === 'string' && ref.text === text.trim()
      } catch (error) {
        return error instanceof LocalpuppetError && error.exitCode === 65
      }
    }),
    {numRuns: 3000},
  )
  t.pass()
})

test('property: parseReleaseRef throws only LocalpuppetErrors for any value at all', (t) => {
  fc.assert(
    fc.property(fc.anything(), (value) => {
      try {
        parseReleaseRef(value)
        return typeof value === 'string'
      } catch (error) {
        return error instanceof LocalpuppetError && error.exitCode === 65
      }
    }),
  )
  t.pass()
})

const segmentChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCZ0123456789_.-')
const appName = fc.oneof(
  fc.constantFrom('foo', 'app', 'tags', 'branches', 'trunk', 'my-app', 'a.b', 'X1'),
  fc
    .tuple(fc.constantFrom(...'abcxyzAZ019'), fc.array(segmentChar, {maxLength: 20}))
    .map(([first, rest]) => first + rest.join('')),
)
const versionName = fc.oneof(
  fc.constantFrom('1.2.0', 'v1.2.0', '1.0.0-rc.1+b.2', 'r1', 'trunk', 'tags', 'branches', 'app'),
  fc
    .tuple(fc.constantFrom(...'abcz019AZ'), fc.array(fc.constantFrom(...'abz09_.+-'), {maxLength: 20}))
    .map(([first, rest]) => first + rest.join('')),
)
const semverRange = fc.oneof(
  fc.tuple(fc.nat(30), fc.nat(30)).map(([major, minor]) => `^${major}.${minor}`),
  fc.tuple(fc.nat(30), fc.nat(30), fc.nat(30)).map(([a, b, c]) => `~${a}.${b}.${c}`),
  fc.tuple(fc.nat(30), fc.nat(30)).map(([a, b]) => `>=${a}.0.0 <${a + b + 1}.0.0`),
  fc.nat(30).map((major) => `${major}.x`),
  fc.constant('*'),
  fc.tuple(fc.nat(9), fc.nat(9)).map(([a, b]) => `^${a}.${b}.0-rc.0 || ${b}.x`),
)

/**
 * `app/tags/trunk` reads as tag `trunk` of app `app` (complete as written), so the prefixed
 * spelling of the trunk of an app called `tags` or `branches` is not generated.
 */
const prefixable = (app: string, kind: string): boolean => !(kind === 'trunk' && (app === 'tags' || app === 'branches'))

const validRef: fc.Arbitrary<{text: string; plain: string; expected: ReleaseRef}> = fc.oneof(
  fc.tuple(appName, fc.boolean()).map(([app, prefixed]) => {
    const plain = `${app}/trunk`
    return {text: prefixed && prefixable(app, 'trunk') ? `app/${plain}` : plain, plain, expected: {kind: 'trunk', app, text: ''} as ReleaseRef}
  }),
  fc.tuple(appName, versionName, fc.boolean()).map(([app, tag, prefixed]) => {
    const plain = `${app}/tags/${tag}`
    return {text: prefixed ? `app/${plain}` : plain, plain, expected: {kind: 'tag', app, tag, text: ''} as ReleaseRef}
  }),
  fc.tuple(appName, versionName, fc.boolean()).map(([app, branch, prefixed]) => {
    const plain = `${app}/branches/${branch}`
    return {text: prefixed ? `app/${plain}` : plain, plain, expected: {kind: 'branch', app, branch, text: ''} as ReleaseRef}
  }),
  fc.tuple(appName, fc.oneof(semverRange, versionName)).map(([app, range]) => {
    const text = `${app}@${range}`
    return {text, plain: text, expected: {kind: 'range', app, range, text: ''} as ReleaseRef}
  }),
)

test('property: every generated valid reference parses to what it names, text kept as written', (t) => {
  fc.assert(
    fc.property(validRef, ({text, plain, expected}) => {
      const ref = parseReleaseRef(text)
      t.deepEqual(ref, {...expected, text})
      // Round trip: the text it keeps parses to the same reference.
      t.deepEqual(parseReleaseRef(ref.text), ref)
      if (ref.kind !== 'range' && ref.kind !== 'channel') t.is(releasePath(ref), plain)
    }),
    {numRuns: 2000},
  )
})

test('property: sorting never throws, keeps every tag, and orders versions by semver precedence', (t) => {
  const version = fc
    .tuple(fc.nat(12), fc.nat(12), fc.nat(12), fc.option(fc.constantFrom('rc.1', 'rc.10', 'alpha', 'beta.2')), fc.boolean())
    .map(([a, b, c, pre, v]) => `${v ? 'v' : ''}${a}.${b}.${c}${pre ? `-${pre}` : ''}`)
  fc.assert(
    fc.property(fc.array(fc.oneof(version, fc.string({maxLength: 12})), {maxLength: 30}), (tags) => {
      const sorted = sortTagsNewestFirst(tags)
      t.deepEqual([...sorted].sort(), [...tags].sort())
      const versions = sorted.filter((tag) => isSemverTag(tag))
      t.deepEqual(sorted.slice(0, versions.length), versions, 'versions come first')
      for (let i = 1; i < versions.length; i++) t.true(semver.compare(versions[i - 1], versions[i]) >= 0, `${versions[i - 1]} before ${versions[i]}`)
      const best = maxSatisfyingTag(tags, '>=0.0.0')
      const releases = versions.filter((tag) => semver.prerelease(tag) === null)
      t.is(best, releases[0])
    }),
  )
})
