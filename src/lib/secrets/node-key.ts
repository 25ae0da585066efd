import {constants} from 'node:fs'
import {randomBytes} from 'node:crypto'
import {link, mkdir, open, rm} from 'node:fs/promises'
import {join, resolve} from 'node:path'

import {LocalpuppetError, UntrustedPathError, describeFsError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import {displayPath} from '../util/shell-quote.js'
import {findTrustProblem, openedFileTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import {newIdentity, recipientOf} from './age.js'

/** Where a node keeps its age identity: `<state dir>/keys/node.key`, the directory 0700, the file 0600. */
export function nodeKeyPath(stateDir: string): string {
  return join(resolve(stateDir), 'keys', 'node.key')
}

/** The node's key is missing or cannot be read (78): nothing encrypted to the node can be opened, so nothing new is applied. */
export class NodeKeyError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('node-key', ExitCode.noKey, message, suggestions)
  }
}

const MAX_KEY_BYTES = 64 * 1024

/**
 * `node-key`: the node's age identity, made once. Its directory must be one only root
 * (or this user) can write, judged like the state dir (77, no override: whoever could
 * write there could swap in a key of their choosing); the file is created with O_EXCL at
 * 0600, so a second run, or two at once, never overwrites a key: both print the one made.
 */
export async function ensureNodeKey(stateDir: string): Promise<{path: string; recipient: string; created: boolean}> {
  const path = nodeKeyPath(stateDir)
  const dir = join(resolve(stateDir), 'keys')
  refuseUnlessAllowed(findTrustProblem(dir, {what: 'node key directory', overridable: false}), {allow: false, overridable: false})
  try {
    await mkdir(dir, {recursive: true, mode: 0o700})
  } catch (error) {
    throw describeFsError(error, `node key directory ${dir}`)
  }

  // Made now: judged again as it is (an existing one may have been made by another user).
  refuseUnlessAllowed(findTrustProblem(dir, {what: 'node key directory', overridable: false}), {allow: false, overridable: false})
  const {identity, recipient} = await newIdentity()
  // Written whole beside it, then linked into place (link never replaces): a node-key
  // stopped or out of disk midway leaves no node.key, and one run at the same time never
  // reads a key half written.
  const temp = join(dir, `.node.key.${randomBytes(6).toString('hex')}.tmp`)
  let handle
  try {
    handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
    try {
      // The form age-keygen writes, so `age --decrypt -i node.key` reads it.
      await handle.writeFile(`# created: ${new Date().toISOString()}\n# public key: ${recipient}\n${identity}\n`)
      await handle.sync()
    } finally {
      await handle.close()
    }

    await link(temp, path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return {path, recipient: (await readNodeKey(stateDir)).recipient, created: false}
    throw describeFsError(error, `node key ${path}`)
  } finally {
    await rm(temp, {force: true})
  }

  return {path, recipient, created: true}
}

/**
 * The node's identity, read only when it can be believed: its directory trusted (77), the
 * file a regular file (never through a link) owned by root or this user and readable by
 * nobody else (77: a key others could read is no longer this node's alone). Missing,
 * unreadable or not an age identity: NodeKeyError (78), naming the file and the fix.
 */
export async function readNodeKey(stateDir: string): Promise<{path: string; identity: string; recipient: string}> {
  const path = nodeKeyPath(stateDir)
  refuseUnlessAllowed(findTrustProblem(path, {what: 'node key', overridable: false}), {allow: false, overridable: false})
  const fix = ['create it with: localpuppet node-key (then publish again with its recipient)']
  let handle
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new NodeKeyError(`node key ${displayPath(path)}: missing; this node cannot open its encrypted input`, fix)
    if (code === 'EACCES' || code === 'EPERM' || code === 'ELOOP') throw new NodeKeyError(`node key ${displayPath(path)}: cannot be read (${code === 'ELOOP' ? 'a symbolic link' : 'permission denied'})`, fix)
    throw describeFsError(error, `node key ${path}`)
  }

  try {
    const info = await handle.stat()
    if (!info.isFile()) throw new NodeKeyError(`node key ${displayPath(path)}: not a regular file`, fix)
    const problem = openedFileTrustProblem(path, info, 'node key')
    if (problem) throw new UntrustedPathError(problem.message)
    if ((info.mode & 0o077) !== 0) {
      throw new UntrustedPathError(`node key ${displayPath(path)}: mode ${(info.mode & 0o777).toString(8).padStart(4, '0')} lets others read it; a key others could read is not this node's alone`, [
        `chmod 600 ${displayPath(path)}, and re-key the node if others may have read it (remove it, localpuppet node-key, publish with the new recipient)`,
      ])
    }

    if (info.size > MAX_KEY_BYTES) throw new NodeKeyError(`node key ${displayPath(path)}: larger than ${MAX_KEY_BYTES} bytes, not a key`, fix)
    const text = (await handle.readFile()).toString('utf8')
    // What a node-key stopped between creating and writing the file left (before keys were linked into place whole).
    if (info.size === 0) throw new NodeKeyError(`node key ${displayPath(path)}: empty (a node-key stopped while writing it); no key was ever in it`, [`remove it and run localpuppet node-key again: rm ${displayPath(path)}`])
    const keys = text.split('\n').map((line) => line.trim()).filter((line) => line.startsWith('AGE-SECRET-KEY-1'))
    if (keys.length !== 1) throw new NodeKeyError(`node key ${displayPath(path)}: ${keys.length === 0 ? 'holds no' : 'holds more than one'} age identity (AGE-SECRET-KEY-1...)`, fix)
    let recipient: string
    try {
      recipient = await recipientOf(keys[0], `node key ${path}`)
    } catch {
      throw new NodeKeyError(`node key ${displayPath(path)}: not a valid age identity`, fix)
    }

    return {path, identity: keys[0], recipient}
  } finally {
    await handle.close()
  }
}
