import {UsageError} from '../lib/errors.js'
import type {PuppetDbConfig} from '../lib/puppetdb/client.js'
import {settingString} from '../lib/config/settings.js'
import {parseDuration} from '../lib/util/duration.js'

/**
 * Where promote's gate (--require-healthy, a channel's policy) reads the fleet, looked up
 * only when a gate needs it: --prometheus or --puppetdb, else the prometheus setting, else
 * the puppetdb setting (env, then the config file); and the bounds of its answers.
 */
export function gateSource(flags: {prometheus?: string; puppetdb?: string; 'prometheus-timeout'?: string; 'stale-after'?: string}) {
  if (flags.prometheus !== undefined && flags.puppetdb !== undefined) throw new UsageError('--prometheus and --puppetdb: give one source of the fleet')
  const source = async (): Promise<string | PuppetDbConfig | null> => {
    const prometheus = flags.puppetdb === undefined ? await settingString('prometheus', flags.prometheus) : null
    return prometheus ?? (await import('../lib/puppetdb/client.js')).puppetDbConfig(flags.puppetdb)
  }
  const bounds = {
    deadlineMs: flags['prometheus-timeout'] === undefined ? undefined : parseDuration(flags['prometheus-timeout'], '--prometheus-timeout'),
    staleAfterMs: flags['stale-after'] === undefined ? undefined : parseDuration(flags['stale-after'], '--stale-after'),
  }
  return {source, bounds}
}
