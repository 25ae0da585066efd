import {webcrypto} from 'node:crypto'

/**
 * age-encryption's ciphers (@noble/*) draw their randomness from `globalThis.crypto`, which
 * Node defines from 19 on; Debian 12's nodejs is 18.19/18.20 (the package's floor, see
 * bin/deb), where it is node:crypto's `webcrypto` and not a global: without this, every
 * key and every encryption fails there with "crypto.getRandomValues must be defined".
 */
const global = globalThis as {crypto?: unknown}
global.crypto ??= webcrypto

// Node 18 and 20.19 (Debian's) call X25519 in Web Crypto experimental and say so on stderr at
// every node key and every input opened: a warning about Node's API, not about the node. It
// alone is kept quiet; every other warning still shows.
const emitWarning = process.emitWarning.bind(process)
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  const text = typeof warning === 'string' ? warning : warning.message
  if (/X25519 Web Crypto API algorithm is an experimental feature/.test(text)) return
  ;(emitWarning as (...args: unknown[]) => void)(warning, ...rest)
}) as typeof process.emitWarning
