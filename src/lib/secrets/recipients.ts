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
    const wrong = await recipientProblem(line)
    if (wrong) {
      throw new InputError(`${terminalText(what)} ${terminalText(path)}:${i + 1}: ${terminalText(JSON.stringify(line.slice(0, 80)))} is not an age recipient (${wrong}, as localpuppet node-key prints it)`)
    }

    recipients.push(line)
  }

  if (recipients.length === 0) throw new InputError(`${terminalText(what)} ${terminalText(path)}: lists no age recipient`, ['put the node\'s recipient there (localpuppet node-key prints it on the node)'])
  return recipients
}

/** Operator recipients (`--recipient age1...`, `--recipients-file FILE`): checked, joined, in order, once each. */
export async function operatorRecipients(given: readonly string[], files: readonly string[]): Promise<string[]> {
  for (const recipient of given) {
    const wrong = await recipientProblem(recipient)
    if (wrong) throw new InputError(`--recipient ${terminalText(JSON.stringify(recipient.slice(0, 80)))}: not an age recipient (${wrong})`)
  }

  const fromFiles: string[] = []
  for (const file of files) fromFiles.push(...((await readRecipientsFile(file, '--recipients-file')) ?? []))
  return [...new Set([...given, ...fromFiles])]
}

/**
 * Why text is not an X25519 recipient, or null when it is: the form (`age1...`), then its
 * Bech32 checksum, which one mistyped character breaks (age refuses it only when
 * encrypting, which would be a crash, not a refusal naming the line).
 */
async function recipientProblem(text: string): Promise<string | null> {
  if (!isRecipient(text)) return 'age1...'
  const {recipientChecksumOk} = await import('./age.js')
  return recipientChecksumOk(text) ? null : 'age1..., but its checksum is wrong: a character mistyped'
}
