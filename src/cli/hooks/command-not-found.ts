import {type Hook, type Interfaces, loadHelpClass} from '@oclif/core'

import {ExitCode} from '../../lib/exit-codes.js'
import {closest} from '../../lib/util/did-you-mean.js'
import {terminalText} from '../../lib/util/terminal-text.js'

/**
 * `localpuppet help [COMMAND]` shows help, as `--help` does (oclif's plugin-help is not
 * installed: a command of its own would cost every start-up a plugin). Anything else,
 * `localpuppet aply`: one line with a suggestion, and 64 like any other usage error.
 */
export const commandNotFound: Hook<'command_not_found'> = async function ({argv = [], config, id}) {
  const [first, ...rest] = id.split(':')
  if (first === 'help') {
    // oclif joins the words of a command with ':' (`help fleet status` reaches here as help:fleet:status).
    const wanted = (rest.length > 0 ? rest : argv.filter((arg) => !arg.startsWith('-'))).join(':')
    if (wanted === '' || config.findCommand(wanted) || config.findTopic(wanted)) {
      const Help = await loadHelpClass(config)
      await new Help(config, config.pjson.oclif.helpOptions).showHelp(wanted === '' ? [] : [wanted])
      return
    }

    return unknown(config, wanted)
  }

  return unknown(config, id)
}

/** Named as the user types it, words separated by spaces (`fleet stat`), with the closest command or topic. */
function unknown(config: Interfaces.Config, id: string): void {
  const spaced = (name: string) => name.replaceAll(':', ' ')
  const guess = closest(spaced(id), [...config.commandIDs, ...config.topics.map((topic) => topic.name)].map(spaced))
  process.stderr.write(`localpuppet: unknown command ${terminalText(JSON.stringify(spaced(id)))}${guess ? ` (did you mean ${guess}?)` : ''}; see localpuppet --help\n`)
  process.exitCode = ExitCode.usage
}
