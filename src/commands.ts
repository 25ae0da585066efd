import Apply from './commands/apply.js'
import History from './commands/history.js'
import Log from './commands/log.js'
import Plan from './commands/plan.js'
import Status from './commands/status.js'

/** oclif's explicit command discovery: no directory scan and no manifest to go stale. */
export const COMMANDS = {apply: Apply, history: History, log: Log, plan: Plan, status: Status}
