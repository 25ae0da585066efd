import {Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {stateFlags} from '../cli/flags.js'

export default class NodeKey extends BaseCommand {
  static override summary = "Create this node's age key once and print its public recipient, for publish to encrypt the node's input to."
  static override description = describeWithExitCodes(
    "The key is <state dir>/keys/node.key (0600, in a 0700 directory only root can write), made on the first run; every " +
      'later run prints the same recipient and never overwrites it. Keep the recipient in git next to the node\'s input ' +
      '(nodes/NAME.pub): publish then stores that node\'s input encrypted to it. To re-key a node (a rebuilt machine), ' +
      'remove the key, run node-key again and publish with the new recipient.',
    [
      {code: 0, meaning: 'the key exists (created now, or already there): its recipient printed'},
      {code: 74, meaning: 'the key could not be written (disk full)'},
      {code: 77, meaning: 'the key directory (or one leading to it) or the key is owned by another user or writable by others, or the key is readable by others (no override)'},
      {code: 78, meaning: 'the key is there but cannot be read or is not an age identity'},
    ],
  )

  static override examples = ['<%= config.bin %> node-key', '<%= config.bin %> node-key --json']
  static override flags = {
    ...stateFlags,
    // Run by the Hiera backend of a run with secrets (secrets/hiera-secrets.ts), through a pipe: never by a person.
    hiera: Flags.string({hidden: true, description: "print a run's secrets (FILE, encrypted to this node) as Hiera data for Puppet", helpValue: 'FILE'}),
  }

  async run(): Promise<{recipient: string; path: string; created: boolean} | void> {
    const {flags} = await this.parse(NodeKey)
    const [{ensureNodeKey}, {defaultStateDir}] = await Promise.all([import('../lib/secrets/node-key.js'), import('../lib/state/state-dir.js')])
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    if (flags.hiera !== undefined) {
      const {hieraDataOfRun} = await import('../lib/secrets/hiera-secrets.js')
      process.stdout.write(JSON.stringify(await hieraDataOfRun(flags.hiera, stateDir)))
      return
    }

    const key = await ensureNodeKey(stateDir)
    this.log(key.recipient)
    return key
  }
}
