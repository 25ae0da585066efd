import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import type {Setting, SettingKey} from '../lib/config/settings.js'
import type {PuppetFound} from '../lib/puppet/puppet-identity.js'
import {redactUrl, terminalText} from '../lib/util/terminal-text.js'

interface ConfigResult {
  /** The configuration file read, or null when there is none. */
  file: string | null
  settings: Record<SettingKey, Omit<Setting, 'key'>>
  /** The puppet the puppet setting finds, how, why, and which Puppet it is. */
  puppet: PuppetFound
}

export default class Config extends BaseCommand {
  static override summary = "Show the node's effective settings and where each comes from."
  static override description = describeWithExitCodes(
    'Settings come from a flag, else an environment variable, else /etc/localpuppet/config.yaml (or the file ' +
      'LOCALPUPPET_CONFIG names), else the built-in default. Shows each setting\'s value and its origin: the variable, ' +
      'the file and line, or built-in. Then which puppet the puppet setting finds and why: a path (or a command ' +
      'other than puppet) as set; plain puppet on PATH, else /opt/puppetlabs/bin/puppet; and which Puppet it is ' +
      '(implementation from the package or gem that owns it, and version).',
    [
      {code: 0, meaning: 'shown'},
      {code: 65, meaning: 'the configuration file is not valid: unknown key or wrong type (named with its line)'},
      {code: 66, meaning: 'the file LOCALPUPPET_CONFIG names does not exist'},
    ],
  )

  static override examples = ['<%= config.bin %> config', '<%= config.bin %> config --json | jq -r .settings.source.value']

  async run(): Promise<ConfigResult> {
    await this.parse(Config)
    const [{SETTINGS, loadConfigFile, resolveSettings}, {explainPuppet}] = await Promise.all([import('../lib/config/settings.js'), import('../lib/puppet/puppet-identity.js')])
    const file = await loadConfigFile()
    // A URL setting (source) is shown without its credentials, --json included: the command that fetches reads it with them.
    const settings = (await resolveSettings()).map((s) => (SETTINGS[s.key].type === 'url' && typeof s.value === 'string' ? {...s, value: redactUrl(s.value)} : s))
    const setting = settings.find((s) => s.key === 'puppet')!
    const puppet = explainPuppet(String(setting.value), setting.from)
    if (!this.jsonEnabled()) {
      const width = Math.max(...settings.map((s) => s.key.length))
      const shown = settings.map((s) => [s.key.padEnd(width), showValue(s.value)] as const)
      const valueWidth = Math.min(48, Math.max(...shown.map(([, value]) => value.length)))
      settings.forEach((s, i) => this.log(`${shown[i][0]}  ${shown[i][1].padEnd(valueWidth)}  ${terminalText(s.origin === 'default' ? 'built-in default' : s.origin === 'env' ? `env ${s.from}` : s.from)}`))
      this.log('')
      this.log(`puppet found: ${terminalText(puppet.path ?? 'none')}  (${terminalText(puppet.why)})`)
      if (puppet.path !== null) this.log(`puppet is: ${puppet.implementation === null ? 'unknown (no Debian package or Ruby gem owns it)' : terminalText(`${puppet.implementation} ${puppet.version ?? '(version unknown)'} (${puppet.owner})`)}`)
    }

    return {file: file.path, settings: Object.fromEntries(settings.map(({key, ...rest}) => [key, rest])) as ConfigResult['settings'], puppet}
  }
}

function showValue(value: Setting['value']): string {
  if (value === null) return '(unset)'
  if (Array.isArray(value)) return value.length === 0 ? '(none)' : value.map((v) => terminalText(/\s/.test(v) ? JSON.stringify(v) : v)).join(' ')
  return terminalText(value)
}
