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

/**
 * The most recipients a node input is encrypted to (the node's and the operators'). The
 * node tries its key on every stanza of the header, an X25519 exchange each (about a
 * millisecond in JavaScript): a file of a megabyte of stanzas would hold a run for seconds,
 * the 16 MiB a run's secrets may be for minutes. Publish refuses more; the node refuses a
 * header with more before trying any.
 */
export const MAX_AGE_RECIPIENTS = 64

/**
 * What a node refuses in a binary age header before any key is tried: more stanzas than
 * MAX_AGE_RECIPIENTS, or a passphrase (scrypt) stanza, whose work factor the file chooses
 * and which publish never writes. null when neither (or when it is not age: the decrypter says so).
 */
export function refusedAgeHeader(binary: Uint8Array): string | null {
  const head = Buffer.from(binary.subarray(0, 1024 * 1024)).toString('latin1')
  const end = head.indexOf('\n---')
  const stanzas = (end === -1 ? head : head.slice(0, end)).split('\n-> ').slice(1)
  if (stanzas.length > MAX_AGE_RECIPIENTS) return `encrypted to more than ${MAX_AGE_RECIPIENTS} recipients`
  if (stanzas.some((stanza) => /^scrypt( |\n|$)/.test(stanza))) return 'encrypted with a passphrase (scrypt), which publish never does'
  return null
}
