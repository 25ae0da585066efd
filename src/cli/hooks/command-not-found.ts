import {type Hook, loadHelpClass} from '@oclif/core'

import {ExitCode} from '../../lib/exit-codes.js'
import {closest} from '../../lib/util/did-you-mean.js'

/**
 * `localpuppet help [COMMAND]` shows help, as `--help` does (oclif's plugin-help is not
 * installed: a command of its own would cost every start-up a plugin). Anything else,
 * `localpuppet aply`: one line with a suggestion, and 64 like any other usage error.
 */
export const commandNotFound: Hook<'command_not_found'> = async function ({argv = [], config, id}) {
  const [first, ...rest] = id.split(':')
  if (first === 'help') {
    // oclif joins words with its topic separator (`help apply` reaches here as help:apply); every command is one word.
    const wanted = rest[0] ?? argv.find((arg) => !arg.startsWith('-')) ?? ''
    if (wanted === '' || config.findCommand(wanted)) {
      const Help = await loadHelpClass(config)
      await new Help(config, config.pjson.oclif.helpOptions).showHelp(wanted === '' ? [] : [wanted])
      return
    }

    return unknown(config.commandIDs, wanted)
  }

  return unknown(config.commandIDs, id)
}

function unknown(commands: string[], id: string): void {
  const guess = closest(id, commands)
  process.stderr.write(`localpuppet: unknown command ${JSON.stringify(id)}${guess ? ` (did you mean ${guess}?)` : ''}; see localpuppet --help\n`)
  process.exitCode = ExitCode.usage
}
