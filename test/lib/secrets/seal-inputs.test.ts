import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {InputError} from '../../../src/lib/errors.js'
import {assertNoPlainAmongSealed, sealNodeDocuments} from '../../../src/lib/secrets/seal-inputs.js'
import {tempDir} from '../../helpers/temp.js'

const RECIPIENT = 'age1z8ljxnw6ku70wv323q3whee0y73c9xcad3phkn38g28l34eg2a5q9nz4rk'

async function documents(t: import('ava').ExecutionContext, pubs: string[]) {
  const dir = await tempDir(t)
  for (const node of pubs) await writeFile(join(dir, `${node}.pub`), `${RECIPIENT}\n`)
  return ['web1', 'db1'].map((node) => ({node, file: join(dir, `${node}.yaml`), bytes: Buffer.from('app: foo/tags/1.0.0\n'), sha256: 'x'}))
}

test('a node with NAME.pub is sealed (its sha256 the ciphertext\'s), one without stays plain', async (t) => {
  const sealed = await sealNodeDocuments(await documents(t, ['web1']), {}, () => false)
  t.is(sealed[0].encrypted, 'age')
  t.regex(sealed[0].bytes.toString(), /^-----BEGIN AGE ENCRYPTED FILE-----\n/)
  t.regex(sealed[0].sha256, /^[0-9a-f]{64}$/)
  t.is(sealed[1].encrypted, undefined)
})

test('a plain input is refused (65) among encrypted ones in this publish or the index, or with operator recipients; --allow-plain-input lets it through', async (t) => {
  const sealed = await sealNodeDocuments(await documents(t, ['web1']), {}, () => false)
  t.throws(() => assertNoPlainAmongSealed(sealed, undefined, {}), {instanceOf: InputError, message: /^node db1: its input would be published in plain text .* \(web1\); nothing published$/})
  const plain = await sealNodeDocuments(await documents(t, []), {}, () => false)
  t.notThrows(() => assertNoPlainAmongSealed(plain, undefined, {}))
  t.throws(() => assertNoPlainAmongSealed(plain, {app1: {encrypted: 'age'}}, {}), {message: /\(app1\); nothing published$/})
  t.throws(() => assertNoPlainAmongSealed(plain, undefined, {operators: [RECIPIENT]}), {message: /^node web1: .* though --recipient or --recipients-file asks for encrypted inputs; nothing published$/})
  t.notThrows(() => assertNoPlainAmongSealed(plain, {app1: {encrypted: 'age'}}, {operators: [RECIPIENT], allowPlain: true}))
})

test('an input marking secrets with no NAME.pub is refused (65), whatever is allowed', async (t) => {
  const error = await t.throwsAsync(sealNodeDocuments(await documents(t, []), {allowPlain: true}, () => true), {instanceOf: InputError})
  t.regex(error!.message, /node web1's input marks secrets \(!secret\) but the node has no recipient .*web1\.pub\): it would be published in plain text$/)
})

test('a node whose NAME.pub and the operators make more recipients than a node accepts is refused (65) at publish', async (t) => {
  const {newIdentity} = await import('../../../src/lib/secrets/age.js')
  const docs = await documents(t, [])
  const many = await Promise.all(Array.from({length: 65}, async () => (await newIdentity()).recipient))
  await writeFile(join(docs[0].file, '..', 'web1.pub'), many.slice(0, 60).join('\n') + '\n')
  const error = await t.throwsAsync(sealNodeDocuments([docs[0]], {operators: many.slice(60)}, () => false), {instanceOf: InputError})
  t.regex(error!.message, /^node web1: 65 recipients \(.*web1\.pub and the operators'\), more than the 64 a node accepts; nothing published$/)
  t.is((await sealNodeDocuments([docs[0]], {operators: many.slice(61)}, () => false))[0].encrypted, 'age')
})

test("two nodes sharing one recipient (a machine cloned after node-key ran) are refused (65): each could read the other's input", async (t) => {
  const docs = await documents(t, ['web1', 'db1'])
  const error = await t.throwsAsync(sealNodeDocuments(docs, {}, () => false), {instanceOf: InputError})
  t.is(error!.message, `${join(docs[1].file, '..', 'db1.pub')}: node db1's recipient ${RECIPIENT} is also node web1's: each could read the other's input; nothing published`)
  // An operator recipient on every input is what --recipient is for, not a shared node key.
  t.is((await sealNodeDocuments(docs.slice(0, 1), {operators: [RECIPIENT]}, () => false))[0].encrypted, 'age')
})
