import {inspect} from 'node:util'

import test from 'ava'

import {parseNodeInput} from '../../../src/lib/input/node-input.js'
import {marksSecrets, restoreSecrets, splitSecrets} from '../../../src/lib/secrets/secret-values.js'
import {Secret} from '../../../src/lib/util/secret.js'
import {InputError} from '../../../src/lib/errors.js'

const input = (text: string) => parseNodeInput(`app: foo/tags/1.0.0\n${text}`, 'web1.yaml')

test('a !secret class parameter leaves the ENC, becomes a Hiera key, and prints redacted with its digest everywhere', (t) => {
  const parsed = input('classes:\n  db:\n    port: 5432\n    password: !secret hunter2\n')
  const {input: enc, secrets} = splitSecrets(parsed)
  t.deepEqual(enc.classes, {db: {port: 5432}})
  t.deepEqual(Object.keys(secrets), ['db::password'])
  const secret = secrets['db::password']
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
  const recorded = JSON.parse(JSON.stringify({classes: {db: {password: new Secret('hunter2'), port: 1}}}))
  const restored = restoreSecrets(recorded, {'db::password': 'hunter2'}, 'run X') as {classes: {db: {password: Secret; port: number}}}
  t.is(restored.classes.db.password.reveal(), 'hunter2')
  t.is(restored.classes.db.port, 1)
  t.throws(() => restoreSecrets(recorded, {'db::password': 'other'}, 'run X'), {message: /run X: the secret db::password \(sha256:[0-9a-f]{16}\) is not among the secrets that run kept/})
})
