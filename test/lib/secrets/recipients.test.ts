import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {operatorRecipients, readRecipientsFile} from '../../../src/lib/secrets/recipients.js'
import {tempDir} from '../../helpers/temp.js'

const GOOD = 'age1z8ljxnw6ku70wv323q3whee0y73c9xcad3phkn38g28l34eg2a5q9nz4rk'
// One character changed: the form of a recipient, its Bech32 checksum wrong.
const MISTYPED = GOOD.slice(0, 10) + (GOOD[10] === 'q' ? 'p' : 'q') + GOOD.slice(11)

test('a recipient with one character mistyped is refused (65) naming the file and line, or the flag; a good one is read', async (t) => {
  const dir = await tempDir(t)
  const file = join(dir, 'web1.pub')
  await writeFile(file, `# web1\n${GOOD}\r\n${MISTYPED}\n`)
  const error = await t.throwsAsync(readRecipientsFile(file, 'recipients of node web1'))
  t.is((error as LocalpuppetError).exitCode, 65)
  t.is(error!.message, `recipients of node web1 ${file}:3: "${MISTYPED}" is not an age recipient (age1..., but its checksum is wrong: a character mistyped, as localpuppet node-key prints it)`)
  await writeFile(file, `${GOOD}\n`)
  t.deepEqual(await readRecipientsFile(file, 'recipients of node web1'), [GOOD])
  const flag = await t.throwsAsync(operatorRecipients([MISTYPED], []))
  t.is((flag as LocalpuppetError).exitCode, 65)
  t.regex(flag!.message, /^--recipient ".*": not an age recipient \(age1\.\.\., but its checksum is wrong/)
})
