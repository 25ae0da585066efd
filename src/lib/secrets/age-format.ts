/** What age's formats look like, without loading the cipher (a plain input's run never loads it). */

/** The first line of an ASCII-armored age file: how a stored node input says it is encrypted. */
export const AGE_ARMOR_HEADER = '-----BEGIN AGE ENCRYPTED FILE-----'

/** An X25519 recipient as age writes it (`age1` + 58 Bech32 characters). */
const RECIPIENT = /^age1[02-9ac-hj-np-z]{58}$/

export function isRecipient(text: string): boolean {
  return RECIPIENT.test(text)
}

/** Whether bytes are an armored age file (publish writes only that form). */
export function isAgeArmored(bytes: Uint8Array | string): boolean {
  const head = typeof bytes === 'string' ? bytes.slice(0, AGE_ARMOR_HEADER.length) : Buffer.from(bytes.subarray(0, AGE_ARMOR_HEADER.length)).toString('latin1')
  return head === AGE_ARMOR_HEADER
}
