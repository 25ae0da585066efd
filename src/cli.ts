import {execute} from '@oclif/core'

/** oclif's explicit command discovery reads COMMANDS from this module (package.json `oclif.commands`). */
export {COMMANDS} from './commands.js'

/** The CLI's entry point, for bin/run.js. */
export async function run(): Promise<void> {
  await execute({dir: import.meta.url})
}
