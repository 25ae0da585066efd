import {Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../../cli/base-command.js'
import {stateFlags, trustFlags} from '../../cli/flags.js'
import {UsageError} from '../../lib/errors.js'
import {assertTrustedStateDir, defaultStateDir} from '../../lib/state/state-dir.js'
import type {FlushResult} from '../../lib/puppetdb/spool.js'
import {terminalUrl} from '../../lib/util/terminal-text.js'

export default class ReportFlush extends BaseCommand {
  static override summary = "Send the runs' reports, facts and catalogs still spooled for PuppetDB, in order."
  static override description = describeWithExitCodes(
    'After each attempt, with the puppetdb setting, its report, facts and catalog are spooled in the state dir and sent for 5 s at most; ' +
      'what PuppetDB did not take waits there (1000 commands or 256 MiB at most; past that the oldest reports are dropped and counted). ' +
      'This sends it now, oldest first, stopping at the first refusal so that the order is kept ' +
      '(but for one PuppetDB refuses as a bad request, 400 or 413, while it accepts the next: that one is dropped and said).',
    [
      {code: 0, meaning: 'the spool is empty (sent, or nothing was waiting)'},
      {code: 64, meaning: 'no puppetdb setting'},
      {code: 69, meaning: 'PuppetDB could not be reached or refused a command: the rest is still spooled'},
      {code: 73, meaning: 'another flush is sending the spool'},
      untrustedExit('the state dir or its PuppetDB spool'),
    ],
  )

  static override examples = ['<%= config.bin %> report flush', '<%= config.bin %> report flush --json']
  static override flags = {
    ...stateFlags,
    ...trustFlags,
    puppetdb: Flags.string({description: 'the PuppetDB to send to (config puppetdb)', helpValue: 'URL'}),
    timeout: Flags.integer({description: 'seconds the whole flush may take', min: 1, default: 300, helpValue: 'SECONDS'}),
  }

  async run(): Promise<FlushResult> {
    const {flags} = await this.parse(ReportFlush)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    this.warnUntrusted(assertTrustedStateDir(stateDir, flags['allow-untrusted']))
    const [{puppetDbConfig, PuppetDbClient}, {flushSpool}, {FleetUnavailableError, LocalpuppetError}, {ExitCode}] = await Promise.all([
      import('../../lib/puppetdb/client.js'),
      import('../../lib/puppetdb/spool.js'),
      import('../../lib/errors.js'),
      import('../../lib/exit-codes.js'),
    ])
    const config = await puppetDbConfig(flags.puppetdb)
    if (!config) throw new UsageError('no PuppetDB to send to: set puppetdb in the configuration (or LOCALPUPPET_PUPPETDB), or pass --puppetdb URL')
    const result = await flushSpool(stateDir, new PuppetDbClient(config), {deadlineMs: flags.timeout * 1000, timeoutMs: 10_000})
    if (result.busy) throw new LocalpuppetError('busy', ExitCode.locked, `${result.error} (${result.pending} waiting)`)
    if (result.dropped > 0) this.warnLines([`${result.dropped} command(s) were dropped: over the spool's bound while PuppetDB was away, damaged, or refused by PuppetDB`])
    if (result.refused.length > 0) this.warnLines(result.refused.map((why) => `PuppetDB refused (dropped): ${why}`))
    this.log(`sent ${result.sent.length} command(s) to ${terminalUrl(config.url)}; ${result.pending} still spooled`)
    if (result.error) throw Object.assign(new FleetUnavailableError(`${result.pending} command(s) still spooled: ${result.error}`), {result})
    return result
  }
}
