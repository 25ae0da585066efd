import {createHash} from 'node:crypto'
import {inspect} from 'node:util'

import test from 'ava'

import {parseNodeInput} from '../../../src/lib/input/node-input.js'
import {marksSecrets, restoreSecrets, splitSecrets} from '../../../src/lib/secrets/secret-values.js'
import {Secret} from '../../../src/lib/util/secret.js'
import {InputError} from '../../../src/lib/errors.js'
import {digestKeyOf, keySecretDigests} from '../../../src/lib/secrets/secret-digest.js'

// Two age identities (what node-key writes), for two nodes.
const IDENTITY = 'AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ'
const OTHER_IDENTITY = 'AGE-SECRET-KEY-1ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ'

const input = (text: string) => parseNodeInput(`app: foo/tags/1.0.0\n${text}`, 'web1.yaml')

test('a !secret class parameter leaves the ENC, becomes a Hiera key, and prints redacted with its digest everywhere', (t) => {
  const parsed = input('classes:\n  db:\n    port: 5432\n    password: !secret hunter2\n')
  const {input: enc, secrets} = splitSecrets(parsed)
  t.deepEqual(enc.classes, {db: {port: 5432}})
  t.deepEqual(Object.keys(secrets), ['db::password'])
  const secret = secrets['db::password'].useDigestKey(digestKeyOf(IDENTITY))
  t.is(secret.reveal(), 'hunter2')
  for (const shown of [JSON.stringify(parsed.raw), String(secret), `${secret}`, inspect(parsed.raw, {depth: 9})]) {
    t.false(shown.includes('hunter2'), shown)
    t.true(shown.includes(secret.digest), shown)
  }
})

test('!secret anywhere but a class parameter is refused (65) naming where', (t) => {
  for (const [text, where] of [
    ['parameters:\n  token: !secret x\n', /parameters\.token/],
    ['classes:\n  db:\n    users:\n      admin: !secret x\n', /classes\.db\.users\.admin/],
    ['classes:\n  db:\n    list: [!secret x]\n', /classes\.db\.list\.0/],
  ] as const) {
    const error = t.throws(() => splitSecrets(input(text)), {instanceOf: InputError})
    t.regex(error!.message, where)
    t.is(error!.exitCode, 65)
  }
})

test('marksSecrets sees a tag, not the word; restoreSecrets puts back only a secret with the digest recorded', (t) => {
  t.true(marksSecrets('app: foo/tags/1.0.0\nclasses:\n  db:\n    password: !secret x\n', 'web1.yaml'))
  t.false(marksSecrets('app: foo/tags/1.0.0\nclasses:\n  db:\n    motd: "say !secret here"\n', 'web1.yaml'))
  const key = digestKeyOf(IDENTITY)
  const recorded = JSON.parse(JSON.stringify({classes: {db: {password: new Secret('hunter2', key), port: 1}}}))
  const restored = restoreSecrets(recorded, {'db::password': 'hunter2'}, 'run X', key) as {classes: {db: {password: Secret; port: number}}}
  t.is(restored.classes.db.password.reveal(), 'hunter2')
  t.is(restored.classes.db.port, 1)
  t.deepEqual(JSON.parse(JSON.stringify(restored)), recorded, 'put back, it shows the digest recorded')
  t.throws(() => restoreSecrets(recorded, {'db::password': 'other'}, 'run X', key), {message: /run X: the secret db::password \(hmac-sha256:[0-9a-f]{16}\) is not among the secrets that run kept/})
  // Another key (the node re-keyed) or none: the keyed digest cannot be matched.
  t.throws(() => restoreSecrets(recorded, {'db::password': 'hunter2'}, 'run X', digestKeyOf(OTHER_IDENTITY)), {instanceOf: InputError})
  t.throws(() => restoreSecrets(recorded, {'db::password': 'hunter2'}, 'run X', null), {instanceOf: InputError})
})

test('a run recorded before digests were keyed (sha256:) still replays; put back, its secret shows the keyed digest', (t) => {
  const legacy = {classes: {db: {password: {localpuppet_secret: `sha256:${createHash('sha256').update('hunter2').digest('hex').slice(0, 16)}`}}}}
  const key = digestKeyOf(IDENTITY)
  const restored = restoreSecrets(legacy, {'db::password': 'hunter2'}, 'run X', key) as {classes: {db: {password: Secret}}}
  t.is(restored.classes.db.password.reveal(), 'hunter2')
  t.regex(restored.classes.db.password.digest, /^hmac-sha256:[0-9a-f]{16}$/)
  t.throws(() => restoreSecrets(legacy, {'db::password': 'hunter3'}, 'run X', key), {message: /the secret db::password \(sha256:/})
})

test('the digest is keyed by the node: not the value\'s sha256 (no offline test of a guess), the same for one node across runs, another for another node; none without a key', (t) => {
  const key = digestKeyOf(IDENTITY)
  const digest = new Secret('hunter2', key).digest
  t.regex(digest, /^hmac-sha256:[0-9a-f]{16}$/)
  t.false(digest.includes(createHash('sha256').update('hunter2').digest('hex').slice(0, 16)))
  t.is(new Secret('hunter2', digestKeyOf(IDENTITY)).digest, digest)
  t.not(new Secret('hunter3', key).digest, digest)
  t.not(new Secret('hunter2', digestKeyOf(OTHER_IDENTITY)).digest, digest)
  const unkeyed = new Secret('hunter2')
  t.deepEqual(JSON.parse(JSON.stringify(unkeyed)), {localpuppet_secret: 'hidden'})
  t.is(String(unkeyed), '[secret]')
  t.is(String(unkeyed.useDigestKey(key)), `[secret ${digest}]`)
  // A document's secrets keyed in place, wherever they are held.
  const document = {classes: {db: {password: new Secret('hunter2')}}, again: [new Secret('hunter2')]}
  keySecretDigests(key, document)
  t.deepEqual(JSON.parse(JSON.stringify(document)), {classes: {db: {password: {localpuppet_secret: digest}}}, again: [{localpuppet_secret: digest}]})
})
