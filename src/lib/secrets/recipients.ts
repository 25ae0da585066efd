import {InputError, NotFoundError, describeFsError} from '../errors.js'
import {readBoundedFile} from '../util/bounded-read.js'
import {terminalText} from '../util/terminal-text.js'
import {isRecipient} from './age-format.js'

/** A recipients file is small: a key a line. */
const MAX_RECIPIENTS_BYTES = 64 * 1024

/**
 * The recipients a file lists, as age's `-R` reads them: one `age1...` a line, blank lines
 * and `#` comments ignored. Only X25519 recipients (what node-key makes): anything else is
 * 65 naming the file and line; an empty list too (nothing could read what is encrypted to
 * it). `missing`: what to say when the file is not there (null: return null instead).
 */
export async function readRecipientsFile(path: string, what: string, missing: 'refuse' | 'absent' = 'refuse'): Promise<string[] | null> {
  let bytes: Buffer
  try {
    bytes = await readBoundedFile(path, {maxBytes: MAX_RECIPIENTS_BYTES, label: `${what} ${path}`, error: (message) => new InputError(terminalText(message)), noFollow: true, expected: 'a file of age recipients'})
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if ((code === 'ENOENT' || code === 'ENOTDIR') && missing === 'absent') return null
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new NotFoundError(`${terminalText(what)} ${terminalText(path)}: not found`)
    if (code) throw describeFsError(error, `${what} ${path}`)
    throw error
  }

  const recipients: string[] = []
  for (const [i, raw] of bytes.toString('utf8').split('\n').entries()) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) continue
    if (!isRecipient(line)) {
      throw new InputError(`${terminalText(what)} ${terminalText(path)}:${i + 1}: ${terminalText(JSON.stringify(line.slice(0, 80)))} is not an age recipient (age1..., as localpuppet node-key prints it)`)
    }

    recipients.push(line)
  }

  if (recipients.length === 0) throw new InputError(`${terminalText(what)} ${terminalText(path)}: lists no age recipient`, ['put the node\'s recipient there (localpuppet node-key prints it on the node)'])
  return recipients
}

/** Operator recipients (`--recipient age1...`, `--recipients-file FILE`): checked, joined, in order, once each. */
export async function operatorRecipients(given: readonly string[], files: readonly string[]): Promise<string[]> {
  for (const recipient of given) {
    if (!isRecipient(recipient)) throw new InputError(`--recipient ${terminalText(JSON.stringify(recipient.slice(0, 80)))}: not an age recipient (age1...)`)
  }

  const fromFiles: string[] = []
  for (const file of files) fromFiles.push(...((await readRecipientsFile(file, '--recipients-file')) ?? []))
  return [...new Set([...given, ...fromFiles])]
}
