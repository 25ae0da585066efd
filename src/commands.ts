import Apply from './commands/apply.js'
import Classes from './commands/classes.js'
import Disable from './commands/disable.js'
import Enable from './commands/enable.js'
import History from './commands/history.js'
import Install from './commands/install.js'
import Log from './commands/log.js'
import PackCommand from './commands/pack.js'
import Plan from './commands/plan.js'
import Releases from './commands/releases.js'
import Rollback from './commands/rollback.js'
import Status from './commands/status.js'
import Validate from './commands/validate.js'
import Verify from './commands/verify.js'

/** oclif's explicit command discovery: no directory scan and no manifest to go stale. */
export const COMMANDS = {
  apply: Apply,
  classes: Classes,
  disable: Disable,
  enable: Enable,
  history: History,
  install: Install,
  log: Log,
  pack: PackCommand,
  plan: Plan,
  releases: Releases,
  rollback: Rollback,
  status: Status,
  validate: Validate,
  verify: Verify,
}
