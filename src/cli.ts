import {execute} from '@oclif/core'

/** oclif reads COMMANDS and the hooks from this module (package.json `oclif`). */
export {COMMANDS} from './commands.js'
export {commandNotFound} from './hooks/command-not-found.js'

/** The CLI's entry point, for bin/run.js. */
export async function run(): Promise<void> {
  await execute({dir: import.meta.url})
}
