import {webcrypto} from 'node:crypto'

/**
 * age-encryption's ciphers (@noble/*) draw their randomness from `globalThis.crypto`, which
 * Node defines from 19 on; Debian 12's nodejs is 18.19/18.20 (the package's floor, see
 * bin/deb), where it is node:crypto's `webcrypto` and not a global: without this, every
 * key and every encryption fails there with "crypto.getRandomValues must be defined".
 */
const global = globalThis as {crypto?: unknown}
global.crypto ??= webcrypto
