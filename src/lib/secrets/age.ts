import {createHash} from 'node:crypto'

import './web-crypto.js'

import * as age from 'age-encryption'

import {InputError} from '../errors.js'

import {refusedAgeHeader} from './age-format.js'

export {AGE_ARMOR_HEADER, MAX_AGE_RECIPIENTS, isAgeArmored, isRecipient} from './age-format.js'

/**
 * age (https://age-encryption.org/v1) through `age-encryption`, the implementation by
 * age's author: what publish writes is standard age (ASCII-armored), which Debian's `age
 * --decrypt -i KEY` reads. Nothing else in localpuppet touches the cipher.
 */

/** A fresh X25519 identity (`AGE-SECRET-KEY-1...`) and its recipient. */
export async function newIdentity(): Promise<{identity: string; recipient: string}> {
  const identity = await age.generateIdentity()
  return {identity, recipient: await age.identityToRecipient(identity)}
}

/** The recipient of an identity; 65 when `identity` is not one (the caller names the file). */
export async function recipientOf(identity: string, where: string): Promise<string> {
  try {
    return await age.identityToRecipient(identity)
  } catch {
    throw new InputError(`${where}: not an age identity (AGE-SECRET-KEY-1...)`)
  }
}

/** Whether age takes a recipient of the right form (`isRecipient`): its Bech32 checksum, which age checks only when encrypting. */
export function recipientChecksumOk(recipient: string): boolean {
  try {
    new age.Encrypter().addRecipient(recipient)
    return true
  } catch {
    return false
  }
}

/**
 * Document in, ciphertext out: the one function publish calls on whatever it stores for
 * a node (its input today; its computed document once inputs are layered). Encrypted to
 * every recipient given (the node's and the operators'), ASCII-armored. Each call draws a
 * fresh file key, so the same document gives different bytes every time.
 */
export async function encryptDocument(document: Uint8Array, recipients: readonly string[]): Promise<Buffer> {
  if (recipients.length === 0) throw new Error('encryptDocument: no recipient')
  const encrypter = new age.Encrypter()
  for (const recipient of new Set(recipients)) encrypter.addRecipient(recipient)
  const sealed = await encrypter.encrypt(document)
  return Buffer.from(age.armor.encode(sealed), 'utf8')
}

/** Why a ciphertext could not be opened: not age at all, or age for other keys / damaged, or a header refused unread (`refused`, with the reason). */
export type DecryptFailure = 'not age' | 'not for this key' | 'damaged' | 'refused'

/**
 * Opens an armored age file with one identity. Fails (returns the reason, never the
 * bytes) when it is not age, was not encrypted to this identity, or does not
 * authenticate (any byte changed): age checks every chunk's tag, so nothing of a
 * tampered file is returned.
 */
export async function decryptDocument(ciphertext: Uint8Array, identity: string): Promise<{ok: true; plain: Buffer} | {ok: false; why: DecryptFailure; detail?: string}> {
  let binary: Uint8Array
  try {
    binary = age.armor.decode(Buffer.from(ciphertext).toString('latin1'))
  } catch {
    return {ok: false, why: 'not age'}
  }

  // Before any key is tried: the header's cost is bounded, and a passphrase never asked for.
  const refused = refusedAgeHeader(binary)
  if (refused) return {ok: false, why: 'refused', detail: refused}
  const decrypter = new age.Decrypter()
  decrypter.addIdentity(identity)
  try {
    return {ok: true, plain: Buffer.from(await decrypter.decrypt(binary))}
  } catch (error) {
    const message = String((error as Error)?.message ?? error)
    return {ok: false, why: /no identity matched|no matching/i.test(message) ? 'not for this key' : 'damaged'}
  }
}

/** sha256 of bytes, hex. */
export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex')
}
