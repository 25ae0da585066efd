import test from 'ava'

import {encryptDocument} from '../../../src/lib/secrets/age.js'
import {ensureNodeKey} from '../../../src/lib/secrets/node-key.js'
import {openNodeDocument} from '../../../src/lib/secrets/open-input.js'
import {InputError} from '../../../src/lib/errors.js'
import {tempDir} from '../../helpers/temp.js'

test('a plain input passes through, needing no key; one the signed index says is encrypted but is plain is refused (65): no downgrade', async (t) => {
  const state = await tempDir(t)
  t.deepEqual(await openNodeDocument('app: foo/tags/1.0.0\n', 'web1.yaml', state), {text: 'app: foo/tags/1.0.0\n', encrypted: false})
  const error = await t.throwsAsync(openNodeDocument('app: foo/tags/1.0.0\n', 'web1.yaml', state, {encrypted: true}), {instanceOf: InputError})
  t.is(error!.message, 'web1.yaml: the signed index says it is encrypted, but it is not an age file; refused')
})

test('an armored file that is no age, one for another key, and one cut short are each refused (65) naming the input', async (t) => {
  const state = await tempDir(t)
  const {recipient} = await ensureNodeKey(state)
  const other = await tempDir(t)
  const {recipient: theirs} = await ensureNodeKey(other)
  const garbage = '-----BEGIN AGE ENCRYPTED FILE-----\nbm90IGFnZQ==\n-----END AGE ENCRYPTED FILE-----\n'
  t.regex((await t.throwsAsync(openNodeDocument(garbage, 'web1.yaml', state), {instanceOf: InputError}))!.message, /^web1\.yaml: encrypted input (not a readable age file|does not authenticate)/)
  const foreign = (await encryptDocument(Buffer.from('x: 1\n'), [theirs])).toString('latin1')
  t.regex((await t.throwsAsync(openNodeDocument(foreign, 'web1.yaml', state), {instanceOf: InputError}))!.message, /not encrypted to this node's key/)
  const mine = (await encryptDocument(Buffer.from('x: 1\n'.repeat(20_000)), [recipient])).toString('latin1').split('\n')
  const cut = [...mine.slice(0, 5), ...mine.slice(-2)].join('\n')
  t.regex((await t.throwsAsync(openNodeDocument(cut, 'web1.yaml', state), {instanceOf: InputError}))!.message, /^web1\.yaml: encrypted input (does not authenticate \(damaged or tampered\)|not a readable age file)/)
  t.deepEqual(await openNodeDocument(mine.join('\n'), 'web1.yaml', state), {text: 'x: 1\n'.repeat(20_000), encrypted: true})
})

test('an age file with more stanzas than a node accepts, or a passphrase (scrypt) stanza, is refused (65) before any key is tried', async (t) => {
  const age = await import('age-encryption')
  const {newIdentity} = await import('../../../src/lib/secrets/age.js')
  const state = await tempDir(t)
  const {recipient} = await ensureNodeKey(state)
  // 65 stanzas, this node's last: a header that grows costs the node an X25519 exchange a stanza.
  const many = new age.Encrypter()
  for (let i = 0; i < 64; i++) many.addRecipient((await newIdentity()).recipient)
  many.addRecipient(recipient)
  const crowded = age.armor.encode(await many.encrypt('x: 1\n'))
  const error = await t.throwsAsync(openNodeDocument(crowded, 'web1.yaml', state), {instanceOf: InputError})
  t.is(error!.message, 'web1.yaml: encrypted input encrypted to more than 64 recipients, not opened; refused, nothing applied')
  // A passphrase's work factor is the file's to choose (2^40 would hold the node for days): never asked for.
  const scrypt = new age.Encrypter()
  scrypt.setPassphrase('anything')
  scrypt.setScryptWorkFactor(2)
  const locked = age.armor.encode(await scrypt.encrypt('x: 1\n'))
  const passphrase = await t.throwsAsync(openNodeDocument(locked, 'web1.yaml', state), {instanceOf: InputError})
  t.regex(passphrase!.message, /^web1\.yaml: encrypted input encrypted with a passphrase \(scrypt\), which publish never does, not opened/)
})
