import Apply from './commands/apply.js'
import Classes from './commands/classes.js'
import Config from './commands/config.js'
import Disable from './commands/disable.js'
import Enable from './commands/enable.js'
import Fetch from './commands/fetch.js'
import History from './commands/history.js'
import Install from './commands/install.js'
import Log from './commands/log.js'
import PackCommand from './commands/pack.js'
import Plan from './commands/plan.js'
import Publish from './commands/publish.js'
import Releases from './commands/releases.js'
import Status from './commands/status.js'
import Validate from './commands/validate.js'
import Verify from './commands/verify.js'

/** oclif's explicit command discovery: no directory scan and no manifest to go stale. */
export const COMMANDS = {
  apply: Apply,
  classes: Classes,
  config: Config,
  disable: Disable,
  enable: Enable,
  fetch: Fetch,
  history: History,
  install: Install,
  log: Log,
  pack: PackCommand,
  plan: Plan,
  publish: Publish,
  releases: Releases,
  status: Status,
  validate: Validate,
  verify: Verify,
}
