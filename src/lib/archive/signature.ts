import {type KeyObject, createHash, createPrivateKey, createPublicKey, sign, verify} from 'node:crypto'
import {readFile, readdir, stat} from 'node:fs/promises'
import {join} from 'node:path'

import {ReleaseError, UsageError, describeFsError} from '../errors.js'
import {assertTrustedPath} from '../util/trusted-path.js'

/** release.json.sig: an Ed25519 signature over release.json's exact bytes. */
export interface ReleaseSignature {
  algorithm: 'ed25519'
  /** sha256 of the signer's public key (SPKI DER), to say which key signed. */
  keyId: string
  /** base64 */
  signature: string
}

export const DEFAULT_TRUST_DIR = '/etc/localpuppet/trusted-keys'

/** The fingerprint that names a public key in messages and signatures. */
export function keyId(key: KeyObject): string {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key
  return `sha256:${createHash('sha256').update(publicKey.export({type: 'spki', format: 'der'})).digest('hex')}`
}

/** Loads an Ed25519 private key in PEM; 64/66/65 when missing or not such a key. */
export async function loadSigningKey(path: string): Promise<KeyObject> {
  let pem: string
  try {
    pem = await readFile(path, 'utf8')
  } catch (error) {
    throw describeFsError(error, `signing key ${path}`)
  }

  let key: KeyObject
  try {
    key = createPrivateKey(pem)
  } catch {
    throw new UsageError(`signing key ${path}: not a private key in PEM`)
  }

  if (key.asymmetricKeyType !== 'ed25519') throw new UsageError(`signing key ${path}: an ${key.asymmetricKeyType} key; --sign needs Ed25519 (openssl genpkey -algorithm ed25519)`)
  return key
}

export function signIndex(indexBytes: Buffer, key: KeyObject): Buffer {
  const signature: ReleaseSignature = {algorithm: 'ed25519', keyId: keyId(key), signature: sign(null, indexBytes, key).toString('base64')}
  return Buffer.from(JSON.stringify(signature) + '\n')
}

/**
 * Trusted public keys from files and directories (every *.pem inside). The default
 * directory counts only when it exists; a path named explicitly must exist.
 */
export async function loadTrustedKeys(paths: string[], defaultDir: string | null = DEFAULT_TRUST_DIR): Promise<KeyObject[]> {
  const keys: KeyObject[] = []
  const load = async (path: string) => {
    let pem: string
    try {
      pem = await readFile(path, 'utf8')
    } catch (error) {
      throw describeFsError(error, `trusted key ${path}`)
    }

    // Node derives the public key from a private one without a word: a private key here
    // is a mistake (the help says PUB.pem), and a secret spread to every node.
    if (/-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/.test(pem)) {
      const pub = path.endsWith('.pem') ? `${path.slice(0, -'.pem'.length)}.pub.pem` : `${path}.pub.pem`
      throw new UsageError(`trusted key ${path} is a private key: pass its public key instead (openssl pkey -in ${path} -pubout -out ${pub}), and keep the private key off the nodes`)
    }

    try {
      const key = createPublicKey(pem)
      if (key.asymmetricKeyType !== 'ed25519') throw new Error('not ed25519')
      keys.push(key)
    } catch {
      throw new UsageError(`trusted key ${path}: not an Ed25519 public key in PEM`)
    }
  }

  const addPath = async (path: string, optional: boolean) => {
    let info
    try {
      info = await stat(path)
    } catch (error) {
      if (optional) return
      throw describeFsError(error, `trusted key ${path}`)
    }

    // A key anyone else can replace (or drop into the directory) trusts their archives.
    assertTrustedPath(path, {what: info.isDirectory() ? 'trusted keys directory' : 'trusted key', overridable: false})
    if (info.isDirectory()) {
      for (const name of (await readdir(path)).filter((n) => n.endsWith('.pem')).sort()) {
        assertTrustedPath(join(path, name), {what: 'trusted key', ancestors: false, overridable: false})
        await load(join(path, name))
      }
    } else {
      await load(path)
    }
  }

  for (const path of paths) await addPath(path, false)
  if (defaultDir) await addPath(defaultDir, true)
  return keys
}

/** Checks release.json's signature against the trusted keys; 65 naming what is wrong. */
export function verifyIndexSignature(indexBytes: Buffer, signatureBytes: Buffer | null, trusted: KeyObject[], label: string): string {
  if (signatureBytes === null) throw new ReleaseError(`${label}: not signed, and trusted keys are configured`, ['sign it with localpuppet pack --sign KEY.pem'])
  let signature: ReleaseSignature
  try {
    signature = JSON.parse(signatureBytes.toString('utf8')) as ReleaseSignature
  } catch {
    throw new ReleaseError(`${label}: release.json.sig is not valid JSON`)
  }

  if (signature?.algorithm !== 'ed25519' || typeof signature.signature !== 'string') throw new ReleaseError(`${label}: release.json.sig: unsupported signature`)
  const bytes = Buffer.from(signature.signature, 'base64')
  const signer = trusted.find((key) => verify(null, indexBytes, key, bytes))
  if (!signer) {
    throw new ReleaseError(`${label}: signature by ${String(signature.keyId)} does not verify with any trusted key (${trusted.length} trusted)`)
  }

  return keyId(signer)
}
