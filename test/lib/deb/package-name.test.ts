import test from 'ava'
import fc from 'fast-check'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {packageName, packageVersion, parsePackageName} from '../../../src/lib/deb/package-name.js'

test('names and versions of ordinary tags', (t) => {
  t.is(packageName('foo', '1.4.0'), 'localpuppet-foo-1.4.0')
  t.is(packageName('web-frontend', 'v2.0.0-rc.1'), 'localpuppet-web-frontend-v2.0.0-rc.1')
  t.is(packageName('my_app', '1.0.0+build.5'), 'localpuppet-my+app-1.0.0+build.5')
  t.deepEqual(parsePackageName('localpuppet-my+app-1.0.0+build.5'), {app: 'my_app', tag: '1.0.0+build.5'})
  t.deepEqual(parsePackageName('localpuppet-web-frontend-v2.0.0-rc.1'), {app: 'web-frontend', tag: 'v2.0.0-rc.1'})
  t.is(parsePackageName('localpuppet-foo'), null)
  t.is(parsePackageName('puppet-module-foo-1.0'), null)
  t.is(packageVersion('1.4.0'), '1.4.0')
  t.is(packageVersion('v1.4.0'), '1.4.0')
  t.is(packageVersion('2.0.0-rc.1'), '2.0.0-rc.1')
  t.is(packageVersion('1.0-'), '0')
})

test('tags and apps that could only be named by folding two into one are refused, naming them', (t) => {
  for (const [app, tag, why] of [
    ['Foo', '1.0.0', /app "Foo" has upper-case letters/],
    ['foo', '1.0.0-RC1', /tag "1.0.0-RC1" has upper-case letters/],
    ['foo', '1.0_1', /tag "1.0_1" must start with a digit .* \[a-z0-9.\+-\]/],
    ['foo', 'release-1', /tag "release-1" must start with a digit/],
    ['web-2', '1.0.0', /app "web-2" has "-" before a digit/],
    ['web-v2', '1.0.0', /app "web-v2" has "-" before a digit/],
  ] as const) {
    const error = t.throws(() => packageName(app, tag), {instanceOf: LocalpuppetError})
    t.is(error?.exitCode, 65)
    t.regex(error!.message, new RegExp(`^${app}/tags/${tag.replace(/[.+]/g, '\\$&')}: cannot be named as a Debian package without ambiguity: `))
    t.regex(error!.message, why)
  }
})

const appArb = fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,20}$/)
const tagArb = fc.stringMatching(/^v?[0-9][a-z0-9.+-]{0,20}$/)

test('the mapping is one-to-one and reads back from the name alone (property)', (t) => {
  fc.assert(
    fc.property(appArb, tagArb, appArb, tagArb, (app1, tag1, app2, tag2) => {
      let name1: string
      let name2: string
      try {
        name1 = packageName(app1, tag1)
        name2 = packageName(app2, tag2)
      } catch (error) {
        if (error instanceof LocalpuppetError) return true
        throw error
      }

      t.deepEqual(parsePackageName(name1), {app: app1, tag: tag1})
      t.regex(name1, /^[a-z0-9][a-z0-9+.-]+$/)
      return (name1 === name2) === (app1 === app2 && tag1 === tag2)
    }),
    {numRuns: 2000},
  )
  t.pass()
})
