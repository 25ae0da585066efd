import type {Hook} from '@oclif/core'

import {ExitCode} from '../../lib/exit-codes.js'
import {closest} from '../../lib/util/did-you-mean.js'

/** `localpuppet aply`: one line with a suggestion, and 64 like any other usage error. */
export const commandNotFound: Hook<'command_not_found'> = async function ({config, id}) {
  const guess = closest(id, config.commandIDs)
  process.stderr.write(`localpuppet: unknown command ${JSON.stringify(id)}${guess ? ` (did you mean ${guess}?)` : ''}; see localpuppet --help\n`)
  process.exitCode = ExitCode.usage
}
