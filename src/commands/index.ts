import {execute, settings} from '@oclif/core'

import {readBuildInfo, versionLine} from '../cli/version.js'

import Apply from './apply.js'
import ChannelBack from './channel/back.js'
import ChannelHistory from './channel/history.js'
import ChannelPolicy from './channel/policy.js'
import Classes from './classes.js'
import Config from './config.js'
import Disable from './disable.js'
import Enable from './enable.js'
import Enc from './enc.js'
import Fetch from './fetch.js'
import FleetStatus from './fleet/status.js'
import History from './history.js'
import Install from './install.js'
import Log from './log.js'
import NodeKey from './node-key.js'
import PackCommand from './pack.js'
import Plan from './plan.js'
import Promote from './promote.js'
import Publish from './publish.js'
import Releases from './releases.js'
import RepositoryList from './repository/list.js'
import RepositoryYank from './repository/yank.js'
import Rollback from './rollback.js'
import Rollout from './rollout/index.js'
import RolloutList from './rollout/list.js'
import RolloutRevert from './rollout/revert.js'
import RolloutShow from './rollout/show.js'
import ReportFlush from './report/flush.js'
import Status from './status.js'
import Validate from './validate.js'
import Verify from './verify.js'

export {commandNotFound} from '../cli/hooks/command-not-found.js'
export {LocalpuppetHelp} from '../cli/help.js'

/** oclif's explicit command discovery: no directory scan and no manifest to go stale. */
export const COMMANDS = {
  apply: Apply,
  'channel:back': ChannelBack,
  'channel:history': ChannelHistory,
  'channel:policy': ChannelPolicy,
  classes: Classes,
  config: Config,
  disable: Disable,
  enable: Enable,
  enc: Enc,
  fetch: Fetch,
  'fleet:status': FleetStatus,
  history: History,
  install: Install,
  log: Log,
  'node-key': NodeKey,
  pack: PackCommand,
  plan: Plan,
  promote: Promote,
  publish: Publish,
  releases: Releases,
  'repository:list': RepositoryList,
  'repository:yank': RepositoryYank,
  'report:flush': ReportFlush,
  rollback: Rollback,
  rollout: Rollout,
  'rollout:list': RolloutList,
  'rollout:revert': RolloutRevert,
  'rollout:show': RolloutShow,
  status: Status,
  validate: Validate,
  verify: Verify,
}

/** The CLI's entry point, for bin/run.js (oclif reads COMMANDS and the hook from this module: package.json `oclif`). */
export async function run(): Promise<void> {
  // oclif's own --version says package.json's version only: this one names the build's commit too.
  if (process.argv.length === 3 && process.argv[2] === '--version') {
    process.stdout.write(versionLine(readBuildInfo(import.meta.url), {platform: process.platform, arch: process.arch, node: process.version}))
    return
  }

  // The built bundle runs: oclif never looks for TypeScript sources of it (it would under
  // NODE_ENV=test or development, and on Node 18 warn that it found none).
  settings.enableAutoTranspile = false
  await execute({dir: import.meta.url})
}
